package stdlib

import (
	"container/list"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

var reModule = &moduleDef{
	name: "@std/re",
	doc: `Regular expressions in Go's RE2 syntax, which guarantees matching in time linear ` +
		`in the input and has no backreferences or lookaround: load("@std/re", "re") and call ` +
		`re.match, re.search and so on. Every function takes the pattern as a string; compiled ` +
		`patterns are cached. An invalid pattern is an error naming the function and the ` +
		`pattern, such as: re.match: invalid pattern "(": missing closing ). Positions are byte ` +
		`offsets, which is also how Starlark indexes strings, so s[m.start:m.end] == m.text.`,
	global: "re",
	members: []memberDef{
		{Member{"re.match", "re.match(pattern, s)",
			`Reports whether pattern matches anywhere in s. Unlike Python's re.match it is not ` +
				`anchored at the start of s; use "^" in the pattern, or re.full_match, to anchor it.`}, reMatcher(false)},
		{Member{"re.full_match", "re.full_match(pattern, s)",
			`Reports whether pattern matches the whole of s, as if it were written \A(?:pattern)\z. ` +
				`Alternatives are all tried: re.full_match("a|ab", "ab") is True.`}, reMatcher(true)},
		{Member{"re.search", "re.search(pattern, s)",
			`Returns None if pattern does not match s, otherwise a struct describing the leftmost ` +
				`match: text (the matched string), start and end (its byte offsets in s), groups (a ` +
				`list with one element per capturing group, in order, each the group's text or None ` +
				`if the group did not take part in the match) and named (a dict from the name of each ` +
				`named group, (?P<name>...), to its text or None).`}, reSearch},
		{Member{"re.find_all", "re.find_all(pattern, s, n=-1)",
			`Returns the list of the texts of successive non-overlapping matches of pattern in s, ` +
				`from left to right. An empty match directly after a previous match is skipped. If n ` +
				`is not negative, at most n matches are returned.`}, reFindAll},
		{Member{"re.sub", "re.sub(pattern, repl, s, n=-1)",
			`Returns a copy of s in which the successive non-overlapping matches of pattern (the ` +
				`same ones re.find_all finds) are replaced by repl; if n is not negative, only the ` +
				`first n matches are replaced. In repl, $1 or ${1} stands for the text of group 1, ` +
				`$name or ${name} for the named group name, and $$ for a literal "$"; a reference to ` +
				`a group that does not exist or did not match is empty. The name after $ is as long ` +
				`as possible, so "$1x" means the group named "1x"; write "${1}x" instead.`}, reSub},
		{Member{"re.split", "re.split(pattern, s, n=-1)",
			`Splits s around the matches of pattern and returns the list of the substrings between ` +
				`them; the texts of the matches and of their groups are not included. If n is ` +
				`negative all substrings are returned; if n is 0 the result is []; otherwise at most ` +
				`n substrings are returned, the last one being the unsplit remainder of s.`}, reSplit},
		{Member{"re.escape", "re.escape(s)",
			`Returns a pattern that matches the literal text s, by escaping every regular ` +
				`expression metacharacter in it: re.escape("1.5+x") is "1\\.5\\+x".`}, reEscape},
	},
}

// reMatcher implements re.match (anywhere in s) and, with full,
// re.full_match (the whole of s).
func reMatcher(full bool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var pattern, s string
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "s", &s); err != nil {
			return nil, err
		}
		re, err := compilePattern(b.Name(), pattern, full)
		if err != nil {
			return nil, err
		}
		return starlark.Bool(re.MatchString(s)), nil
	}
}

func reSearch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pattern, s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "s", &s); err != nil {
		return nil, err
	}
	re, err := compilePattern(b.Name(), pattern, false)
	if err != nil {
		return nil, err
	}
	loc := re.FindStringSubmatchIndex(s)
	if loc == nil {
		return starlark.None, nil
	}
	group := func(i int) starlark.Value {
		if loc[2*i] < 0 {
			return starlark.None
		}
		return starlark.String(s[loc[2*i]:loc[2*i+1]])
	}
	names := re.SubexpNames()
	groups := make([]starlark.Value, len(names)-1)
	named := starlark.NewDict(0)
	for i := 1; i < len(names); i++ {
		groups[i-1] = group(i)
		if names[i] != "" {
			if err := named.SetKey(starlark.String(names[i]), groups[i-1]); err != nil {
				return nil, err
			}
		}
	}
	return starlarkstruct.FromStringDict(starlark.String("match"), starlark.StringDict{
		"text":   group(0),
		"start":  starlark.MakeInt(loc[0]),
		"end":    starlark.MakeInt(loc[1]),
		"groups": starlark.NewList(groups),
		"named":  named,
	}), nil
}

func reFindAll(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pattern, s string
	n := -1
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "s", &s, "n?", &n); err != nil {
		return nil, err
	}
	re, err := compilePattern(b.Name(), pattern, false)
	if err != nil {
		return nil, err
	}
	return stringList(re.FindAllString(s, n)), nil
}

func reSub(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pattern, repl, s string
	n := -1
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "repl", &repl, "s", &s, "n?", &n); err != nil {
		return nil, err
	}
	re, err := compilePattern(b.Name(), pattern, false)
	if err != nil {
		return nil, err
	}
	return starlark.String(replace(re, repl, s, n)), nil
}

func reSplit(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pattern, s string
	n := -1
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "s", &s, "n?", &n); err != nil {
		return nil, err
	}
	re, err := compilePattern(b.Name(), pattern, false)
	if err != nil {
		return nil, err
	}
	return stringList(re.Split(s, n)), nil
}

func reEscape(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s); err != nil {
		return nil, err
	}
	return starlark.String(regexp.QuoteMeta(s)), nil
}

// replace replaces the first n matches of re in s (all if n < 0) by the
// expansion of template.
func replace(re *regexp.Regexp, template, s string, n int) string {
	matches := re.FindAllStringSubmatchIndex(s, n)
	if len(matches) == 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	last := 0
	for _, m := range matches {
		out = append(out, s[last:m[0]]...)
		out = re.ExpandString(out, template, s, m)
		last = m[1]
	}
	out = append(out, s[last:]...)
	return string(out)
}

// stringList converts strs to a Starlark list of strings.
func stringList(strs []string) *starlark.List {
	elems := make([]starlark.Value, len(strs))
	for i, s := range strs {
		elems[i] = starlark.String(s)
	}
	return starlark.NewList(elems)
}

// compilePattern returns the compiled form of pattern, anchored at both
// ends of the input if full is set, from the cache if possible. Compile
// errors name the function fn and the pattern.
func compilePattern(fn, pattern string, full bool) (*regexp.Regexp, error) {
	key := cacheKey{pattern, full}
	if re := patterns.get(key); re != nil {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err == nil && full {
		re, err = regexp.Compile(`\A(?:` + pattern + `)\z`)
	}
	if err != nil {
		return nil, patternError(fn, pattern, err)
	}
	patterns.put(key, re)
	return re, nil
}

// patternError describes a compile error of pattern in function fn.
func patternError(fn, pattern string, err error) error {
	msg := err.Error()
	var synErr *syntax.Error
	if errors.As(err, &synErr) {
		msg = string(synErr.Code)
		if synErr.Expr != "" && synErr.Expr != pattern {
			msg += ": `" + synErr.Expr + "`"
		}
	}
	return fmt.Errorf("%s: invalid pattern %q: %s", fn, pattern, msg)
}

// patternCacheSize bounds the number of compiled patterns kept.
const patternCacheSize = 256

// patterns caches compiled patterns for all functions of @std/re.
var patterns = newRegexpCache(patternCacheSize)

type cacheKey struct {
	pattern string
	full    bool
}

type cacheEntry struct {
	key cacheKey
	re  *regexp.Regexp
}

// regexpCache is a concurrency-safe cache of compiled patterns that holds
// at most max entries, evicting the least recently used one.
type regexpCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry, most recently used first
	index map[cacheKey]*list.Element
}

func newRegexpCache(capacity int) *regexpCache {
	return &regexpCache{max: capacity, order: list.New(), index: make(map[cacheKey]*list.Element)}
}

// get returns the cached pattern for key, or nil.
func (c *regexpCache) get(key cacheKey) *regexp.Regexp {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.index[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).re
}

// put adds re to the cache under key, evicting the least recently used
// entry if the cache is full.
func (c *regexpCache) put(key cacheKey, re *regexp.Regexp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.index[key] = c.order.PushFront(&cacheEntry{key, re})
	for c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.index, oldest.Value.(*cacheEntry).key)
	}
}

// len returns the number of cached patterns.
func (c *regexpCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
