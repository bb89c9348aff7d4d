package stdlib

import (
	"fmt"
	"regexp"
	"sync"
	"testing"
)

func TestReModule(t *testing.T) {
	runAsserts(t, `
load("assert.star", "assert")
load("@std/re", "re")

assert.eq(type(re), "module")
assert.eq(str(re), '<module "re">')

# match: unanchored
assert.true(re.match("b+", "abbbc"))
assert.true(not re.match("^b", "abc"))
assert.true(re.match("", ""))
assert.true(not re.match("x", ""))
assert.true(re.match("(?i)ABC", "xabcx"))
assert.true(re.match(pattern = "a", s = "a"))

# full_match: anchored at both ends, all alternatives tried
assert.true(re.full_match("a|ab", "ab"))
assert.true(not re.full_match("b", "abc"))
assert.true(not re.full_match("abc", "abc\n"))
assert.true(re.full_match("(?m)a$\nb", "a\nb"))
assert.true(not re.full_match("a", ""))
assert.true(re.full_match("", ""))
# the anchored and unanchored forms of a pattern are cached separately
assert.true(re.match("a", "ba"))
assert.true(not re.full_match("a", "ba"))
assert.true(re.match("a", "ba"))

# search
assert.eq(re.search("x", "abc"), None)
m = re.search("(\\w+)@(\\w+)(\\.org)?", "mail bob@example now")
assert.eq(type(m), "struct")
assert.eq(m.text, "bob@example")
assert.eq(m.start, 5)
assert.eq(m.end, 16)
assert.eq(m.groups, ["bob", "example", None])
assert.eq(m.named, {})
s = "é=1, ü=2"
m = re.search("(?P<key>ü)=(?P<value>\\d)(?P<unit>s)?", s)
assert.eq(m.text, "ü=2")
assert.eq(m.start, 6)  # byte offsets: "é" is two bytes
assert.eq(m.end, 10)
assert.eq(s[m.start:m.end], m.text)
assert.eq(m.groups, ["ü", "2", None])
assert.eq(m.named, {"key": "ü", "value": "2", "unit": None})
m = re.search("", "abc")
assert.eq((m.text, m.start, m.end, m.groups), ("", 0, 0, []))
m = re.search("(a)|(b)", "b")
assert.eq(m.groups, [None, "b"])
m.groups.append("mutable")
assert.eq(len(m.groups), 3)

# find_all
assert.eq(re.find_all("\\d+", "a1 b22 c333"), ["1", "22", "333"])
assert.eq(re.find_all("\\d+", "a1 b22 c333", 2), ["1", "22"])
assert.eq(re.find_all("\\d+", "a1 b22 c333", n = 0), [])
assert.eq(re.find_all("\\d+", "abc"), [])
assert.eq(re.find_all("a*", "baaac"), ["", "aaa", ""])
assert.eq(re.find_all("(a)(b)", "abab"), ["ab", "ab"])

# sub
assert.eq(re.sub("(\\w+)@(\\w+)", "$2 at ${1}", "bob@example"), "example at bob")
assert.eq(re.sub("(?P<first>\\w+) (?P<last>\\w+)", "${last}, $first", "Ada Lovelace"), "Lovelace, Ada")
assert.eq(re.sub("a", "b", "aaaa", 2), "bbaa")
assert.eq(re.sub("a", "b", "aaaa", n = 0), "aaaa")
assert.eq(re.sub("a", "b", "aaaa", n = -1), "bbbb")
assert.eq(re.sub("x", "y", "abc"), "abc")
assert.eq(re.sub("(a)", "$1x", "a"), "")
assert.eq(re.sub("(a)", "${1}x", "a"), "ax")
assert.eq(re.sub("(a)", "$$1", "a"), "$1")
assert.eq(re.sub("(a)", "$9", "a"), "")
assert.eq(re.sub("(a)|b", "[$1]", "ab"), "[a][]")
assert.eq(re.sub("a*", "-", "baaac"), "-b-c-")
assert.eq(re.sub("", "-", "ab"), "-a-b-")

# split
assert.eq(re.split(",\\s*", "a, b,c"), ["a", "b", "c"])
assert.eq(re.split(",", "a,b,c", 2), ["a", "b,c"])
assert.eq(re.split(",", "a,b,c", n = 0), [])
assert.eq(re.split(",", "a,b,c", -1), ["a", "b", "c"])
assert.eq(re.split(",", ""), [""])
assert.eq(re.split("(,)", "a,b"), ["a", "b"])
assert.eq(re.split("x", "abc"), ["abc"])

# escape
assert.eq(re.escape("1.5+x"), "1\\.5\\+x")
assert.eq(re.escape("plain"), "plain")
assert.eq(re.escape(""), "")
assert.true(re.full_match(re.escape("a.b*c?(d)[e]{f}|g^$\\"), "a.b*c?(d)[e]{f}|g^$\\"))
`)
}

func TestReErrors(t *testing.T) {
	checkErrors(t, `load("@std/re", "re")`, []errorCase{
		{`re.match("(", "")`, `re.match: invalid pattern "(": missing closing )`},
		{`re.full_match(")", "")`, `re.full_match: invalid pattern ")": unexpected )`},
		{`re.search("a**", "")`, "re.search: invalid pattern \"a**\": invalid nested repetition operator: `**`"},
		{`re.find_all("[a", "")`, `re.find_all: invalid pattern "[a": missing closing ]`},
		{`re.sub("x\\q", "", "")`, "re.sub: invalid pattern \"x\\\\q\": invalid escape sequence: `\\q`"},
		{`re.split("(?P<>a)", "")`, "re.split: invalid pattern \"(?P<>a)\": invalid named capture: `(?P<>`"},
		{`re.match("(?<=a)b", "")`, `re.match: invalid pattern "(?<=a)b": invalid named capture`},
		{`re.match("a(?=b)", "")`, "re.match: invalid pattern \"a(?=b)\": invalid or unsupported Perl syntax: `(?=`"},
		{`re.match("a")`, `re.match: missing argument for s`},
		{`re.match(1, "a")`, `re.match: for parameter pattern: got int, want string`},
		{`re.full_match("a", None)`, `re.full_match: for parameter s: got NoneType, want string`},
		{`re.search("a", 1)`, `re.search: for parameter s: got int, want string`},
		{`re.find_all("a", "a", "2")`, `re.find_all: for parameter n: got string, want int`},
		{`re.find_all("a", "a", 1, 2)`, `re.find_all: got 4 arguments, want at most 3`},
		{`re.sub("a", "b")`, `re.sub: missing argument for s`},
		{`re.sub("a", 1, "a")`, `re.sub: for parameter repl: got int, want string`},
		{`re.split("a", "a", n = None)`, `re.split: for parameter "n": got NoneType, want int`},
		{`re.escape(1)`, `re.escape: for parameter s: got int, want string`},
		{`re.compile("a")`, `module has no .compile field or method`},
	})
}

// TestReplaceMatchesGo checks that replace with n < 0 agrees with
// regexp.Regexp.ReplaceAllString, including around empty matches.
func TestReplaceMatchesGo(t *testing.T) {
	patterns := []string{`a*`, `a`, ``, `b*|a`, `(a)|b`, `\b`, `x*`, `(?P<w>\w+)`, `ä*`, `$`, `^`}
	inputs := []string{"", "a", "baaac", "abab", "xx yy", "äää bä", "aaa"}
	templates := []string{"-", "[$1]", "${w}!", "$$", ""}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		for _, s := range inputs {
			for _, tmpl := range templates {
				if got, want := replace(re, tmpl, s, -1), re.ReplaceAllString(s, tmpl); got != want {
					t.Errorf("replace(%q, %q, %q, -1) = %q, want %q", p, tmpl, s, got, want)
				}
			}
		}
	}
}

func TestRegexpCacheBounded(t *testing.T) {
	c := newRegexpCache(3)
	for i := range 10 {
		p := fmt.Sprintf("p%d", i)
		c.put(cacheKey{p, false}, regexp.MustCompile(p))
		if c.len() > 3 {
			t.Fatalf("cache holds %d entries, want at most 3", c.len())
		}
	}
	// The least recently used entries were evicted.
	if c.get(cacheKey{"p6", false}) != nil {
		t.Error("p6 is still cached")
	}
	if c.get(cacheKey{"p9", false}) == nil {
		t.Error("p9 is not cached")
	}
	// A lookup makes an entry the most recently used one.
	c.get(cacheKey{"p7", false})
	c.put(cacheKey{"q", false}, regexp.MustCompile("q"))
	if c.get(cacheKey{"p7", false}) == nil {
		t.Error("p7 was evicted although it was used recently")
	}
	if c.get(cacheKey{"p8", false}) != nil {
		t.Error("p8 is still cached although it was the least recently used")
	}
	// Anchored and unanchored forms are distinct entries.
	c.put(cacheKey{"q", true}, regexp.MustCompile(`\A(?:q)\z`))
	if c.get(cacheKey{"q", false}) == c.get(cacheKey{"q", true}) {
		t.Error("anchored and unanchored forms share an entry")
	}
}

func TestCompilePatternBoundedAndConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range patternCacheSize + 50 {
				p := fmt.Sprintf("x%d|y%d", i, g%2)
				re, err := compilePattern("re.match", p, i%2 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				if want := i%2 != 0; re.MatchString("zx"+fmt.Sprint(i)) != want {
					t.Errorf("pattern %q (anchored %v) gave the wrong result", p, i%2 == 0)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := patterns.len(); n > patternCacheSize {
		t.Errorf("pattern cache holds %d entries, want at most %d", n, patternCacheSize)
	}
}
