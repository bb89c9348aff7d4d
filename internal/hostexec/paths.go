package hostexec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks bounds the symbolic links followed while resolving one path.
const maxSymlinks = 255

// cleanLogical validates a logical path and returns its cleaned form ("."
// for "" and for the root itself). label names the path in errors.
func cleanLogical(p, label string) (string, error) {
	var reason string
	switch {
	case strings.IndexByte(p, 0) >= 0:
		reason = "contains a NUL byte"
	case strings.IndexByte(p, '\\') >= 0:
		reason = "must use forward slashes"
	case strings.HasPrefix(p, "/") || hasDrive(p):
		reason = "must be relative"
	default:
		for seg := range strings.SplitSeq(p, "/") {
			if seg == ".." {
				reason = `must not contain a ".." segment`
				break
			}
		}
	}
	if reason != "" {
		return "", fmt.Errorf("local sandbox %s %q is not a valid logical path: %s", label, p, reason)
	}
	if p == "" {
		return ".", nil
	}
	return path.Clean(p), nil
}

// hasDrive reports whether p starts with a Windows drive ("C:").
func hasDrive(p string) bool {
	if len(p) < 2 || p[1] != ':' {
		return false
	}
	c := p[0] | 0x20
	return c >= 'a' && c <= 'z'
}

// realPath resolves the absolute path p, following every symbolic link
// the way the kernel would. A missing component ends the resolution: it
// and the rest of the path are appended lexically, so a dangling link is
// resolved to the place it points at.
func realPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("local sandbox: %q is not absolute", p)
	}
	resolved := "/"
	rest := splitPath(p)
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return filepath.Join(append([]string{next}, rest...)...), nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(splitPath(target), rest...)
	}
	return resolved, nil
}

// splitPath splits a slash-separated path into its components.
func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// within reports whether the cleaned absolute path p is boundary or lies
// below it.
func within(boundary, p string) bool {
	if boundary == "/" {
		return true
	}
	return p == boundary || strings.HasPrefix(p, boundary+"/")
}

// resolveDir resolves the logical directory rel below base and requires
// an existing directory inside boundary.
func resolveDir(base, rel, boundary, label string) (string, error) {
	real, err := realPath(filepath.Join(base, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("local sandbox %s %q: %w", label, rel, err)
	}
	if !within(boundary, real) {
		return "", fmt.Errorf("local sandbox %s %q resolves outside its configured boundary", label, rel)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("local sandbox %s %q must be a directory", label, rel)
	}
	return real, nil
}

// checkInside reports an error when the logical path rel below the real
// directory base resolves outside base.
func checkInside(base, rel, label string) error {
	real, err := realPath(filepath.Join(base, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("local sandbox %s %q: %w", label, rel, err)
	}
	if !within(base, real) {
		return fmt.Errorf("local sandbox %s %q resolves outside its configured boundary", label, rel)
	}
	return nil
}
