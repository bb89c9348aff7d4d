package eval

import "io/fs"

// FileInfoKind returns the FileInfo.Kind of an entry of mode m: "file"
// for a regular file, "directory", or "other" (a symbolic link, a named
// pipe, a device, a socket). It is pure and safe for concurrent use.
func FileInfoKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	}
	return "other"
}

// FileKind names the type of an entry of mode m for a message: "regular
// file", "directory", "symbolic link", "named pipe", "socket", "character
// device", "device" (a block device) or "irregular file". It is pure and
// safe for concurrent use.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsRegular():
		return "regular file"
	}
	return "irregular file"
}
