package starlib

import (
	"fmt"
	"io"
	"os"
)

// MaxSourceBytes bounds the source of one workflow or module file.
const MaxSourceBytes = 16 << 20

// ReadSource reads the workflow or module file path: a regular file (or
// a link to one) of at most MaxSourceBytes. A FIFO, a device or a
// directory is refused before it is opened, so that a load() of
// "/dev/zero" or of a pipe neither exhausts memory nor waits forever. A
// missing file gives the os.Stat error.
func ReadSource(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
	}
	if info.Size() > MaxSourceBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d bytes a source file may have", path, info.Size(), MaxSourceBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSourceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSourceBytes {
		return nil, fmt.Errorf("%s grew past the %d bytes a source file may have while it was read", path, MaxSourceBytes)
	}
	return data, nil
}
