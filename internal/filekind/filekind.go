// Package filekind names the type of a file system entry for error
// messages ("is a symbolic link, not a regular file"). It is pure and safe
// for concurrent use.
package filekind

import "io/fs"

// Of names the type a mode describes: "regular file", "directory",
// "symbolic link", "named pipe", "socket", "character device", "device",
// or "irregular file" for anything else.
func Of(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
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
	}
	return "irregular file"
}
