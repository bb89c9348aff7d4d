//go:build !unix

package journal

import (
	"errors"
	"fmt"
	"os"
)

// flock is unsupported without flock(2): runs cannot be held safely.
func flock(*os.File, bool) (bool, error) {
	return false, fmt.Errorf("locking journal runs needs flock(2): %w", errors.ErrUnsupported)
}

func funlock(*os.File) error { return nil }
