package wire_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal/wire"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackLoadsTheSameProgram: a bundle holds the entry and every module
// it loads (beside, below and above it, through another module, twice),
// no standard module and no file it does not load; loaded from the
// bundle alone, after the files are gone, it gives the same globals.
func TestPackLoadsTheSameProgram(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"flows/review.star":  "load(\"lib/a.star\", \"a\")\nload(\"../shared/c.star\", \"c\")\nload(\"@std/text\", \"dedent\")\nANSWER = a + c\n",
		"flows/lib/a.star":   "load(\"../b.star\", \"b\")\nload(\"../../shared/c.star\", \"c\")\na = b + 1\n",
		"flows/b.star":       "b = 40\n",
		"shared/c.star":      "c = 1\n",
		"flows/unused.star":  "x = 1\n",
		"shared/unused.star": "y = 2\n",
	})
	// The files are named as loading them from the path given names
	// them (a relative path here), so that positions read as aml run's.
	t.Chdir(root)
	b, err := wire.Pack(filepath.Join("flows", "review.star"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range b.Files {
		paths = append(paths, f.Path)
	}
	if got, want := strings.Join(paths, " "), "flows/b.star flows/lib/a.star flows/review.star shared/c.star"; got != want || b.Entry != "flows/review.star" {
		t.Fatalf("bundle of %q holds %q, want %q", b.Entry, got, want)
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	digest := b.Digest()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	w, err := starlib.LoadFile(b.Entry, starlib.LoadOptions{FS: b.FS()})
	if err != nil {
		t.Fatalf("load from the bundle: %v", err)
	}
	if got := w.Globals["ANSWER"]; got == nil || got.String() != "42" {
		t.Fatalf("ANSWER = %v, want 42", got)
	}
	if _, err := fs.ReadFile(b.FS(), "unused.star"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file the program does not load: %v", err)
	}

	// Any change of a module changes the digest; the same files give the
	// same digest.
	root = t.TempDir()
	writeFiles(t, root, map[string]string{"e.star": "load(\"m.star\", \"m\")\nX = m\n", "m.star": "m = 1\n"})
	one, _ := wire.Pack(filepath.Join(root, "e.star"))
	two, _ := wire.Pack(filepath.Join(root, "e.star"))
	writeFiles(t, root, map[string]string{"m.star": "m = 2\n"})
	three, _ := wire.Pack(filepath.Join(root, "e.star"))
	if one.Digest() != two.Digest() || one.Digest() == three.Digest() || one.Digest() == digest {
		t.Fatalf("digests: same files %s and %s, a changed module %s", one.Digest(), two.Digest(), three.Digest())
	}
}

// TestPackRefusals: a missing module names the load() statement's file,
// line and column; a tampered bundle is refused before it is loaded.
func TestPackRefusals(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"e.star": "X = 1\n\nload(\"lib/m.star\", \"m\")\n", "lib/m.star": "load(\"gone.star\", \"g\")\nm = 1\n"})
	_, err := wire.Pack(filepath.Join(root, "e.star"))
	var pe *wire.PackError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(root, "lib", "m.star")+":1:6: load(\"gone.star\")") {
		t.Fatalf("missing module: %v", err)
	}
	if _, err := wire.Pack(filepath.Join(root, "nothere.star")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing entry: %v", err)
	}

	writeFiles(t, root, map[string]string{"lib/m.star": "m = 1\n"})
	b, err := wire.Pack(filepath.Join(root, "e.star"))
	if err != nil {
		t.Fatal(err)
	}
	b.Files[0].Data = []byte("X = 666\n")
	if err := b.Verify(); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("tampered bundle: %v", err)
	}
	b.Files = b.Files[1:]
	if err := b.Verify(); err == nil || !strings.Contains(err.Error(), "entry") {
		t.Fatalf("bundle without its entry: %v", err)
	}
}

// TestPackRefusesStayingProviders: a provider that a function body makes
// with a function (deterministic_sandbox(exec=)) cannot travel to a
// worker, and Pack names the call; the same factory at the top level, a
// function body's provider made from data, and deterministic_agent(
// respond=) anywhere (its sessions compute in workflow code) are packed.
func TestPackRefusesStayingProviders(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"stay.star":   "def _exec(command, args):\n    return \"x\"\n\ndef main():\n    box = deterministic_sandbox(exec = _exec)\n    return sandbox(script(\"ls\", shell = \"sh\"), provider = box)\n",
		"lambda.star": "main = lambda: sandbox(script(\"ls\", shell = \"sh\"), provider = deterministic_sandbox(_exec))\n\ndef _exec(command, args):\n    return \"x\"\n",
		"top.star":    "def _exec(command, args):\n    return \"x\"\n\nbox = deterministic_sandbox(exec = _exec)\n\ndef main():\n    return sandbox(script(\"ls\", shell = \"sh\"), provider = box, access = \"read-write\")\n",
		"data.star":   "def main():\n    return sandbox(script(\"ls\", shell = \"sh\"), provider = local_sandbox(setup = \"true\"), access = \"read-write\")\n",
		"agent.star":  "def main():\n    echo = deterministic_agent(respond = lambda req: req.prompt)\n    return agent(\"x\", provider = echo)\n",
	})
	for name, at := range map[string]string{"stay.star": ":5:32: deterministic_sandbox(exec=)", "lambda.star": ":1:84: deterministic_sandbox(exec=)"} {
		_, err := wire.Pack(filepath.Join(root, name))
		var pe *wire.ProviderError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), filepath.Join(root, name)+at) || !strings.Contains(err.Error(), "make the provider at the top level") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"top.star", "data.star", "agent.star"} {
		if _, err := wire.Pack(filepath.Join(root, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
