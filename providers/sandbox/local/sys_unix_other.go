//go:build unix && !linux

package local

import "errors"

// waitExited is unavailable: the leader is reaped by exec.Cmd.Wait
// before its group is swept.
func waitExited(int) error { return errors.ErrUnsupported }
