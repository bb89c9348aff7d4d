//go:build !unix

package acp

import (
	"os"
	"os/exec"
)

// setProcessGroup is a no-op where the host has no process groups.
func setProcessGroup(*exec.Cmd) {}

// killTree kills the agent process; descendants are not reachable here.
func killTree(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

// signalCode reports an unknown signal exit.
func signalCode(*os.ProcessState) int { return -1 }
