//go:build linux

package hostexec

import (
	"syscall"
	"unsafe"
)

// setDeathSignal asks for SIGKILL when the thread that started the
// process exits: with Go, when this process exits (the runtime does not
// end threads that no goroutine locked).
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// waitExited blocks until the process pid has exited without reaping it
// (waitid with WNOWAIT), so its process group id stays reserved until
// exec.Cmd.Wait reaps it.
func waitExited(pid int) error {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return errno
		}
	}
}
