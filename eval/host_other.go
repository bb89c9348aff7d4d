//go:build !unix

package eval

import "os/exec"

// setProcessGroup does nothing where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the command's process.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// signalled reports no signal where exit statuses carry none.
func signalled(*exec.ExitError) (int, bool) { return 0, false }
