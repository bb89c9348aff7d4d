//go:build unix

package remote

import "syscall"

// noFollow opens a file without following a link in its place.
const noFollow = syscall.O_NOFOLLOW
