//go:build !unix

package remote

// noFollow: os.Root refuses links that leave the tree; there is no
// O_NOFOLLOW.
const noFollow = 0
