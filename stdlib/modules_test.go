package stdlib

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

func TestNames(t *testing.T) {
	want := []string{"@std/path", "@std/re", "@std/text"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	Names()[0] = "changed"
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("after modifying a result, Names() = %q, want %q", got, want)
	}
}

func TestModuleUnknown(t *testing.T) {
	for _, name := range []string{"", "@std", "@std/", "@std/os", "std/text", "@std/text/x", "@STD/text"} {
		if globals, ok := Module(name); ok || globals != nil {
			t.Errorf("Module(%q) = %v, %v, want nil, false", name, globals, ok)
		}
		if doc := Doc(name); doc != "" {
			t.Errorf("Doc(%q) = %q, want \"\"", name, doc)
		}
		if members := Members(name); members != nil {
			t.Errorf("Members(%q) = %v, want nil", name, members)
		}
	}
}

func TestModuleGlobals(t *testing.T) {
	wantGlobals := map[string][]string{
		"@std/text": {"dedent", "indent", "lines", "wrap"},
		"@std/path": {"path"},
		"@std/re":   {"re"},
	}
	for _, name := range Names() {
		globals, ok := Module(name)
		if !ok {
			t.Fatalf("Module(%q) not found", name)
		}
		if got := globals.Keys(); !slices.Equal(got, wantGlobals[name]) {
			t.Errorf("Module(%q) globals = %q, want %q", name, got, wantGlobals[name])
		}
		// The map is the caller's; the values are shared.
		again, _ := Module(name)
		delete(globals, globals.Keys()[0])
		if len(again) != len(wantGlobals[name]) {
			t.Errorf("deleting from one result of Module(%q) changed another", name)
		}
		for k, v := range again {
			if v2, _ := Module(name); v2[k] != v {
				t.Errorf("Module(%q)[%q] is a different value on each call", name, k)
			}
		}
	}
}

func TestModuleValuesAreReadOnly(t *testing.T) {
	_, err := exec(t, `
load("@std/path", "path")
path.join = None
`)
	if err == nil || !strings.Contains(err.Error(), "can't assign to .join field of module") {
		t.Errorf("assigning to a module member: got %v, want an error", err)
	}
	globals, _ := Module("@std/re")
	mod := globals["re"].(*starlarkstruct.Module)
	for name, v := range mod.Members {
		b, ok := v.(*starlark.Builtin)
		if !ok {
			t.Errorf("re.%s is a %s, want builtin_function_or_method", name, v.Type())
			continue
		}
		if b.Name() != "re."+name {
			t.Errorf("re.%s has name %q", name, b.Name())
		}
	}
}

// TestCatalog checks that Members describes exactly the functions that
// the modules define.
func TestCatalog(t *testing.T) {
	for _, name := range Names() {
		if Doc(name) == "" {
			t.Errorf("Doc(%q) is empty", name)
		}
		globals, _ := Module(name)
		defined := map[string]bool{}
		for g, v := range globals {
			if mod, ok := v.(*starlarkstruct.Module); ok {
				for attr := range mod.Members {
					defined[g+"."+attr] = true
				}
			} else {
				defined[g] = true
			}
		}
		members := Members(name)
		if len(members) != len(defined) {
			t.Errorf("Members(%q) lists %d functions, the module defines %d", name, len(members), len(defined))
		}
		for _, m := range members {
			if !defined[m.Name] {
				t.Errorf("Members(%q) lists %q, which the module does not define", name, m.Name)
			}
			if !strings.HasPrefix(m.Signature, m.Name+"(") || !strings.HasSuffix(m.Signature, ")") {
				t.Errorf("%s: malformed signature %q", m.Name, m.Signature)
			}
			if m.Doc == "" || strings.Contains(m.Doc, "\n") {
				t.Errorf("%s: doc %q is not one non-empty paragraph", m.Name, m.Doc)
			}
		}
		members[0].Name = "changed"
		if Members(name)[0].Name == "changed" {
			t.Errorf("modifying a result of Members(%q) changed the catalog", name)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tt := range []struct{ src, msg string }{
		{`load("@std/text", "nope")`, `load: name nope not found in module @std/text`},
		{`load("@std/path", "join")`, `load: name join not found in module @std/path`},
		{`load("@std/os", "x")`, `cannot load @std/os: no module "@std/os"`},
	} {
		_, err := exec(t, tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: got error %v, want one containing %q", tt.src, err, tt.msg)
		}
	}
}

// TestConcurrentUse runs Starlark programs that use every module from
// several goroutines at once; run it with -race.
func TestConcurrentUse(t *testing.T) {
	const src = `
load("@std/text", "dedent", "indent", "wrap", "lines")
load("@std/path", "path")
load("@std/re", "re")

def check(i):
    p = "p%d" % (i % 300)
    if not re.full_match(p + "|q", p):
        fail("full_match")
    if re.search("(?P<n>\\d+)", p).named["n"] != str(i % 300):
        fail("search")
    if re.sub(p, "x", p + p) != "xx":
        fail("sub")
    if path.join("a", p) != "a/" + p or path.rel("a", "a/" + p) != p:
        fail("path")
    if lines(indent(dedent("  a\n  b"), p)) != [p + "a", p + "b"]:
        fail("text")
    if wrap("a b", 1) != "a\nb":
        fail("wrap")

def run():
    for i in range(400):
        check(i)

run()
`
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			thread := newThread(t)
			thread.Name = fmt.Sprint("worker ", g)
			_, err := starlark.ExecFileOptions(fileOptions, thread, "concurrent.star", src, nil)
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
