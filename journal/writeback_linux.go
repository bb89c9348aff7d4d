package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's dirty pages to
// disk without waiting for them (sync_file_range(2) over the whole
// file), so that the next fsync has less left to do. It is only a hint:
// errors are the next fsync's to report.
func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
