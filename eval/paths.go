package eval

import (
	"fmt"
	"path"
	"strings"
)

// CheckLogicalPath validates a portable path: relative, slash-separated,
// without empty, "." or ".." segments (a lone "." means the root when
// allowDot is set). It returns the cleaned path.
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
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		switch seg {
		case "..":
			return "", fmt.Errorf("path %q leaves its root through ..", p)
		case "", ".":
			return "", fmt.Errorf("path %q has an empty or . segment", p)
		}
	}
	return path.Clean(p), nil
}
