//go:build unix

package docker

import "syscall"

// pidOpenFlags open a pid file without following a link or blocking on a
// FIFO.
const pidOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
