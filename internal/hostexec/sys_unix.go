//go:build unix

package hostexec

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// supported reports whether the host has process groups.
const supported = true

// readFlags opens files for ReadFile; O_NONBLOCK keeps a FIFO from
// blocking the open (it is then rejected as not a regular file).
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK

// setProcessGroup makes the command the leader of a new process group
// and, on Linux, has the kernel SIGKILL it when this process dies, so that
// an agent or script does not outlive a killed aml (its own descendants
// are found by their marks: procscope.Orphans).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// killGroup sends SIGKILL to every process of the group pgid. A group
// that no longer exists is not an error.
func killGroup(pgid int) error {
	if pgid <= 1 {
		return fmt.Errorf("local sandbox: refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// exitStatus is the exit code of a reaped process, or 128+signal when a
// signal ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
