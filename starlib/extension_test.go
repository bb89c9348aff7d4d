package starlib_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// greet is an embedder's own builtin, added through the same Extension
// mechanism the provider families use.
var greet = &starlib.Extension{
	Name: "greetings",
	Builtins: []*starlib.Builtin{{
		Name:    "greeting",
		Group:   "runtime",
		Doc:     "Returns a greeting for name.",
		Params:  []starlib.Param{{Name: "name", Type: "str", Positional: true, Doc: "Who to greet."}},
		Returns: "a string",
		Impl: func(c *starlib.Call) (starlark.Value, error) {
			if c.Str("name") == "" {
				return nil, c.Errorf("name must be a non-empty string")
			}
			return starlark.String("Hello, " + c.Str("name")), nil
		},
	}},
}

func TestExtensionBuiltin(t *testing.T) {
	src := []byte(`
def main():
    return greeting("AML")
`)
	got, err := starlib.Run(context.Background(), "inline.star", "", starlib.LoadOptions{Source: src, Extensions: []*starlib.Extension{greet}}, eval.Options{})
	if err != nil || got != "Hello, AML" {
		t.Fatalf("got %q, %v", got, err)
	}
	// Without the extension the name is undefined.
	_, err = starlib.LoadFile("inline.star", starlib.LoadOptions{Source: src})
	if err == nil || !strings.Contains(err.Error(), "undefined: greeting") {
		t.Fatalf("without the extension: %v", err)
	}
	// Its argument checks are the catalog's.
	_, err = starlib.Run(context.Background(), "inline.star", "", starlib.LoadOptions{Source: []byte("def main():\n    return greeting(nme = 1)\n"), Extensions: []*starlib.Extension{greet}}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), `greeting: unexpected keyword argument "nme" (did you mean "name"?)`) {
		t.Fatalf("bad keyword: %v", err)
	}
	// It is documented next to the core builtins.
	if b, ok := starlib.Lookup("greeting", greet); !ok || b.Signature() != "greeting(name)" {
		t.Fatalf("Lookup: %v %v", b, ok)
	}
	found := false
	for _, b := range starlib.Catalog(greet) {
		found = found || b.Name == "greeting"
	}
	if !found || len(starlib.Catalog(greet)) != len(starlib.Catalog())+1 {
		t.Fatal("Catalog does not list the extension's builtin")
	}
	if _, ok := starlib.Lookup("greeting"); ok {
		t.Fatal("the core catalog lists an extension's builtin")
	}
}

func TestExtensionNameTaken(t *testing.T) {
	clash := &starlib.Extension{Name: "clash", Builtins: []*starlib.Builtin{{Name: "agent", Impl: func(*starlib.Call) (starlark.Value, error) { return starlark.None, nil }}}}
	_, err := starlib.LoadFile("inline.star", starlib.LoadOptions{Source: []byte("x = 1\n"), Extensions: []*starlib.Extension{clash}})
	if err == nil || !strings.Contains(err.Error(), `extension "clash": builtin "agent" is already predeclared`) {
		t.Fatalf("error = %v", err)
	}
}

// TestLoadFromFS: the entry file and the modules it loads come from an
// fs.FS, with paths relative to the loading file.
func TestLoadFromFS(t *testing.T) {
	fsys := fstest.MapFS{
		"flows/review.star":    {Data: []byte("load(\"lib/lanes.star\", \"lane\")\n\ndef main():\n    return lane(\"security\")\n")},
		"flows/lib/lanes.star": {Data: []byte("load(\"../../shared/text.star\", \"title\")\n\ndef lane(kind):\n    return title(kind) + \" review\"\n")},
		"shared/text.star":     {Data: []byte("def title(s):\n    return s.upper()\n")},
	}
	got, err := starlib.Run(context.Background(), "flows/review.star", "", starlib.LoadOptions{FS: fsys}, eval.Options{})
	if err != nil || got != "SECURITY review" {
		t.Fatalf("got %q, %v", got, err)
	}
	_, err = starlib.LoadFile("flows/missing.star", starlib.LoadOptions{FS: fsys})
	if err == nil || !strings.Contains(err.Error(), "cannot read workflow") {
		t.Fatalf("missing entry: %v", err)
	}
	fsys["flows/broken.star"] = &fstest.MapFile{Data: []byte("load(\"nope.star\", \"x\")\n")}
	_, err = starlib.LoadFile("flows/broken.star", starlib.LoadOptions{FS: fsys})
	if err == nil || !strings.Contains(err.Error(), "cannot read module") {
		t.Fatalf("missing module: %v", err)
	}
}

func TestSurfaceLimit(t *testing.T) {
	if starlib.SurfaceLimit(0) != eval.Unlimited || starlib.SurfaceLimit(5) != 5 {
		t.Fatal("SurfaceLimit")
	}
}

// TestStandIn: a stand-in accepts any arguments and fails the call with
// its error, at the call's position.
func TestStandIn(t *testing.T) {
	missing := errors.New("not linked here")
	ext := &starlib.Extension{Name: "absent", Builtins: []*starlib.Builtin{starlib.StandIn("far_sandbox", "providers", "Linked elsewhere.", missing)}}
	src := []byte("p = far_sandbox(\"x\", image = \"y\", labels = {\"a\": \"b\"})\n\ndef main():\n    return \"x\"\n")
	_, err := starlib.LoadFile("inline.star", starlib.LoadOptions{Source: src, Extensions: []*starlib.Extension{ext}})
	if err == nil || !strings.Contains(err.Error(), "inline.star:1:") || !strings.Contains(err.Error(), "far_sandbox: not linked here") {
		t.Fatalf("a call of the stand-in: %v", err)
	}
	if b, ok := starlib.Lookup("far_sandbox", ext); !ok || b.Doc != "Linked elsewhere." || b.Signature() != "far_sandbox()" {
		t.Fatalf("Lookup: %+v %v", b, ok)
	}
}
