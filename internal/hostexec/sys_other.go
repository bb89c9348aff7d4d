//go:build !unix

package hostexec

import (
	"errors"
	"os"
	"os/exec"
)

// supported reports whether the host has process groups; New fails
// without them.
const supported = false

const readFlags = os.O_RDONLY

func setProcessGroup(*exec.Cmd) {}

func killGroup(int) error { return errors.ErrUnsupported }

func waitExited(int) error { return errors.ErrUnsupported }

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
