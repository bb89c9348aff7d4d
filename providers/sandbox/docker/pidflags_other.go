//go:build !unix

package docker

// pidOpenFlags: os.Root refuses links that leave the staging; there is no
// FIFO to block on.
const pidOpenFlags = 0
