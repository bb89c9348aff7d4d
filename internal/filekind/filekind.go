// Package filekind names the type of a file system entry from its mode:
// in messages (Name, and Coarse in the evaluator's) and as
// eval.FileInfo.Kind (Info). It imports no other package of this module.
package filekind

import "io/fs"

// Info returns the eval.FileInfo.Kind of an entry of mode m: "file"
// for a regular file, "directory", or "other" (a symbolic link, a named
// pipe, a device, a socket). It is pure and safe for concurrent use.
func Info(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	}
	return "other"
}

// Name names the type of an entry of mode m for a message: "regular
// file", "directory", "symbolic link", "named pipe", "socket", "character
// device", "device" (a block device) or "irregular file". It is pure and
// safe for concurrent use.
func Name(m fs.FileMode) string {
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

// Coarse names the type of an entry of mode m for the evaluator's
// messages, in fewer words than Name: "regular file", "directory",
// "symbolic link", "named pipe", "socket", "device" (of either kind) or
// "special file". It is pure and safe for concurrent use.
func Coarse(m fs.FileMode) string {
	switch n := Name(m); n {
	case "character device":
		if m&fs.ModeDevice != 0 {
			return "device"
		}
		return "special file"
	case "irregular file":
		return "special file"
	default:
		return n
	}
}
