// Package stdlib provides the standard Starlark modules that AML
// workflows load with load("@std/...", ...). It depends only on
// go.starlark.net and the Go standard library, and everything it exports
// is safe for concurrent use.
//
// A Starlark thread serves the modules from its Load function:
//
//	thread.Load = func(_ *starlark.Thread, name string) (starlark.StringDict, error) {
//		if globals, ok := stdlib.Module(name); ok {
//			return globals, nil
//		}
//		return nil, fmt.Errorf("unknown module %q", name)
//	}
//
// The modules and their members are:
//
//	@std/text   globals dedent, indent, wrap, lines
//	    dedent(s)                  remove common indentation (see Dedent)
//	    indent(s, prefix)          prefix every non-blank line
//	    wrap(s, width)             greedy word wrap, paragraph by paragraph
//	    lines(s)                   list of lines without terminators
//
//	@std/path   global path, POSIX and purely lexical, never touching files
//	    path.join(*parts)          join with "/" and clean
//	    path.base(p)               last element
//	    path.dir(p)                all but the last element
//	    path.ext(p)                extension of the last element, with its dot
//	    path.stem(p)               last element without its extension
//	    path.clean(p)              shortest equivalent path
//	    path.split(p)              (dir, file) split after the final slash
//	    path.is_abs(p)             whether p begins with "/"
//	    path.rel(base, target)     target relative to base, or an error
//
//	@std/re     global re, Go RE2 syntax, positions in bytes
//	    re.match(pattern, s)              whether pattern matches anywhere in s
//	    re.full_match(pattern, s)         whether pattern matches all of s
//	    re.search(pattern, s)             None or struct(text, start, end, groups, named)
//	    re.find_all(pattern, s, n=-1)     texts of the matches
//	    re.sub(pattern, repl, s, n=-1)    replace matches; $1, ${name} in repl
//	    re.split(pattern, s, n=-1)        substrings between the matches
//	    re.escape(s)                      pattern matching s literally
//
// Names lists the load names, Doc describes a module, and Members gives
// the signature and documentation of each function of a module.
package stdlib
