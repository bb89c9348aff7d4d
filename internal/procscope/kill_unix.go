//go:build unix

package procscope

import "syscall"

func kill(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
