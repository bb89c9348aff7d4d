package eval

import (
	"fmt"
	"path"
	"strings"
)

// The portable length limits of a logical path: every workspace store and
// sandbox filesystem can hold a path of at most maxPathBytes whose names
// have at most maxNameBytes each (POSIX PATH_MAX and NAME_MAX), so a
// longer one is refused when it is written, naming it, instead of
// failing a later save.
const (
	maxPathBytes = 4095
	maxNameBytes = 255
)

// CheckLogicalPath validates a portable path: relative, slash-separated,
// without empty, "." or ".." segments (a lone "." means the root when
// allowDot is set), at most 4,095 bytes long with names of at most 255
// bytes. It returns the cleaned path.
func CheckLogicalPath(p string, allowDot bool) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path is empty")
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path %q contains a backslash: use forward slashes", p)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	case path.IsAbs(p) || (len(p) >= 2 && p[1] == ':'):
		return "", fmt.Errorf("path %q is absolute: paths are relative to the active root", p)
	}
	if p == "." {
		if allowDot {
			return ".", nil
		}
		return "", fmt.Errorf("path %q names the root itself", p)
	}
	if len(p) > maxPathBytes {
		return "", fmt.Errorf("path %s is %d bytes long; a path may have at most %d bytes, so that every workspace and sandbox can store it", shortPath(p), len(p), maxPathBytes)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		switch seg {
		case "..":
			//lint:ignore ST1005 the message ends with the segment it names, which users' goldens hold
			return "", fmt.Errorf("path %q leaves its root through ..", p)
		case "", ".":
			return "", fmt.Errorf("path %q has an empty or . segment", p)
		}
		if len(seg) > maxNameBytes {
			return "", fmt.Errorf("path %s has a name of %d bytes; a name may have at most %d bytes", shortPath(p), len(seg), maxNameBytes)
		}
	}
	return path.Clean(p), nil
}

// shortPath quotes p, cut to its first and last 40 bytes when long.
func shortPath(p string) string {
	if len(p) <= 100 {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%q…%q", p[:40], p[len(p)-40:])
}
