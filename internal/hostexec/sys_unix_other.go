//go:build unix && !linux

package hostexec

import (
	"errors"
	"syscall"
)

// setDeathSignal is unavailable off Linux.
func setDeathSignal(*syscall.SysProcAttr) {}

// waitExited is unavailable: the leader is reaped by exec.Cmd.Wait
// before its group is swept.
func waitExited(int) error { return errors.ErrUnsupported }
