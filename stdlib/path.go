package stdlib

import (
	"fmt"
	"path"
	"strings"

	"go.starlark.net/starlark"
)

var pathModule = &moduleDef{
	name: "@std/path",
	doc: `Lexical manipulation of slash-separated paths: load("@std/path", "path") and call ` +
		`path.join, path.base and so on. Every function works on the text of its arguments ` +
		`only, following POSIX rules with "/" as the separator on every platform; none of ` +
		`them consults the file system, so results are deterministic.`,
	global: "path",
	members: []memberDef{
		{Member{"path.join", "path.join(*parts)",
			`Joins any number of path elements with "/" and cleans the result as path.clean does. ` +
				`Empty elements are ignored; the result is "" if there are no non-empty elements. ` +
				`An absolute element does not discard the ones before it: path.join("a", "/b") is "a/b".`}, pathJoin},
		{Member{"path.base", "path.base(p)",
			`Returns the last element of p, after removing trailing slashes. ` +
				`The result is "." for an empty p and "/" for a p made only of slashes.`}, pathBase},
		{Member{"path.dir", "path.dir(p)",
			`Returns all but the last element of p, cleaned as path.clean does: path.dir("a/b/c") ` +
				`is "a/b", path.dir("c") is "." and path.dir("/c") is "/".`}, pathDir},
		{Member{"path.ext", "path.ext(p)",
			`Returns the file name extension of p: the suffix of p that begins at the final dot ` +
				`after its last slash, or "" if there is no such dot. path.ext("a/b.tar.gz") is ` +
				`".gz"; path.ext("a/b.txt/") is "", as the text after the last slash is empty.`}, pathExt},
		{Member{"path.stem", "path.stem(p)",
			`Returns path.base(p) without its extension, so that path.stem(p) + ` +
				`path.ext(path.base(p)) == path.base(p). path.stem("a/b.tar.gz") is "b.tar" and ` +
				`path.stem(".bashrc") is "", since the extension of ".bashrc" is the whole name.`}, pathStem},
		{Member{"path.clean", "path.clean(p)",
			`Returns the shortest path equivalent to p by purely lexical processing: repeated ` +
				`slashes become one, "." elements are removed, each ".." removes the preceding ` +
				`non-".." element, and ".." at the start of an absolute path is dropped. ` +
				`The result is "." for an empty p and never ends in a slash unless it is "/".`}, pathClean},
		{Member{"path.split", "path.split(p)",
			`Splits p immediately after its final slash and returns the tuple (dir, file); ` +
				`dir keeps the trailing slash and is "" if p has no slash, so dir + file == p. ` +
				`path.split("a/b/c.txt") is ("a/b/", "c.txt").`}, pathSplit},
		{Member{"path.is_abs", "path.is_abs(p)",
			`Reports whether p is absolute, that is, whether it begins with "/".`}, pathIsAbs},
		{Member{"path.rel", "path.rel(base, target)",
			`Returns a relative path that, joined to base with path.join, is lexically equivalent ` +
				`to target; both are cleaned first and the result is "." when they are equal. ` +
				`It is an error if one of base and target is absolute and the other is not, or if ` +
				`the result would require knowing the name of a directory that base reaches through ` +
				`"..", as in path.rel("..", "a").`}, pathRel},
	},
}

// unpackPath unpacks the single string argument p.
func unpackPath(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (string, error) {
	var p string
	err := starlark.UnpackArgs(b.Name(), args, kwargs, "p", &p)
	return p, err
}

func pathJoin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: unexpected keyword argument %s", b.Name(), kwargs[0][0])
	}
	parts := make([]string, len(args))
	for i, arg := range args {
		s, ok := arg.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter %d: got %s, want string", b.Name(), i+1, arg.Type())
		}
		parts[i] = string(s)
	}
	return starlark.String(path.Join(parts...)), nil
}

func pathBase(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return starlark.String(path.Base(p)), nil
}

func pathDir(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return starlark.String(path.Dir(p)), nil
}

func pathExt(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return starlark.String(path.Ext(p)), nil
}

func pathStem(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	base := path.Base(p)
	return starlark.String(strings.TrimSuffix(base, path.Ext(base))), nil
}

func pathClean(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return starlark.String(path.Clean(p)), nil
}

func pathSplit(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	dir, file := path.Split(p)
	return starlark.Tuple{starlark.String(dir), starlark.String(file)}, nil
}

func pathIsAbs(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	p, err := unpackPath(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return starlark.Bool(path.IsAbs(p)), nil
}

func pathRel(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var base, target string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "base", &base, "target", &target); err != nil {
		return nil, err
	}
	rel, ok := relPath(base, target)
	if !ok {
		return nil, fmt.Errorf("%s: cannot make %q relative to %q", b.Name(), target, base)
	}
	return starlark.String(rel), nil
}

// relPath returns a path lexically equivalent to target when joined to
// base, or false if there is none that can be determined lexically.
func relPath(basePath, targPath string) (string, bool) {
	base := path.Clean(basePath)
	targ := path.Clean(targPath)
	if targ == base {
		return ".", true
	}
	if base == "." {
		base = ""
	}
	if path.IsAbs(base) != path.IsAbs(targ) {
		return "", false
	}
	// Position base[b0:bi] and targ[t0:ti] at the first differing elements.
	bl, tl := len(base), len(targ)
	var b0, bi, t0, ti int
	for {
		for bi < bl && base[bi] != '/' {
			bi++
		}
		for ti < tl && targ[ti] != '/' {
			ti++
		}
		if targ[t0:ti] != base[b0:bi] {
			break
		}
		if bi < bl {
			bi++
		}
		if ti < tl {
			ti++
		}
		b0, t0 = bi, ti
	}
	if base[b0:bi] == ".." {
		return "", false
	}
	if b0 == bl {
		return targ[t0:], true
	}
	// Elements of base remain: go up past each of them, then down.
	up := strings.Repeat("../", strings.Count(base[b0:bl], "/")) + ".."
	if t0 != tl {
		return path.Clean(up + "/" + targ[t0:]), true
	}
	return up, true
}
