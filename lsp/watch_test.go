package lsp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/protocol"
)

// TestDependentsRechecked: a client that registers watchers dynamically
// is asked to watch **/*.star; and when a file changes (on disk, edited,
// closed), every open file that loads it, directly or through another
// file, is checked again.
func TestDependentsRechecked(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"lib.star": "def other():\n    return \"x\"\n",
		"mid.star": "load(\"lib.star\", \"other\")\ndef relay():\n    return other()\n",
	})
	c := startClient(t, Options{})
	var res map[string]any
	c.mustCall(protocol.MethodInitialize, map[string]any{
		"rootUri": fileURI(dir),
		"capabilities": map[string]any{"workspace": map[string]any{
			"didChangeWatchedFiles": map[string]any{"dynamicRegistration": true}}},
	}, &res)
	c.notify(protocol.MethodInitialized, map[string]any{})

	// The watcher registration.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		regs, wake := c.registrations, c.wake
		c.mu.Unlock()
		if len(regs) > 0 {
			var p struct {
				Registrations []struct {
					Method          string `json:"method"`
					RegisterOptions struct {
						Watchers []struct {
							GlobPattern string `json:"globPattern"`
						} `json:"watchers"`
					} `json:"registerOptions"`
				} `json:"registrations"`
			}
			if err := json.Unmarshal(regs[0], &p); err != nil || len(p.Registrations) != 1 ||
				p.Registrations[0].Method != protocol.MethodWorkspaceDidChangeWatchedFiles ||
				len(p.Registrations[0].RegisterOptions.Watchers) != 1 || p.Registrations[0].RegisterOptions.Watchers[0].GlobPattern != "**/*.star" {
				t.Fatalf("registration = %s (%v)", regs[0], err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not register a watcher")
		}
		select {
		case <-wake:
		case <-time.After(time.Until(deadline)):
		}
	}

	// main loads helper from lib (missing), relay from mid (there).
	libPath := filepath.Join(dir, "lib.star")
	u := c.open(filepath.Join(dir, "main.star"), "load(\"lib.star\", \"helper\")\nload(\"mid.star\", \"relay\")\n\ndef main():\n    return [helper(), relay()]\n")
	if got := codes(c.diagnostics(u, 1)); !strings.Contains(got, "load-symbol") {
		t.Fatalf("diagnostics = %s, want load-symbol for helper", got)
	}

	// lib.star changes on disk: main is checked again.
	n := c.publications(u)
	if err := os.WriteFile(libPath, []byte("def helper():\n    return \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.notify(protocol.MethodWorkspaceDidChangeWatchedFiles, map[string]any{"changes": []map[string]any{{"uri": fileURI(libPath), "type": 2}}})
	if got := codes(c.publishedAfter(u, n)); got != "" {
		t.Fatalf("diagnostics after lib.star gained helper on disk: %s, want none", got)
	}

	// lib.star opened and edited: main is checked again; closing it goes
	// back to the disk's text.
	n = c.publications(u)
	lu := c.open(libPath, "def helper():\n    return \"x\"\n")
	c.publishedAfter(u, n)
	n = c.publications(u)
	change(c, lu, 2, "def helper2():\n    return \"x\"\n")
	if got := codes(c.publishedAfter(u, n)); !strings.Contains(got, "load-symbol") {
		t.Fatalf("diagnostics after the edit removed helper: %s, want load-symbol", got)
	}
	n = c.publications(u)
	c.notify(protocol.MethodTextDocumentDidClose, map[string]any{"textDocument": map[string]any{"uri": lu}})
	if got := codes(c.publishedAfter(u, n)); got != "" {
		t.Fatalf("diagnostics after closing lib.star (helper on disk): %s, want none", got)
	}

}

// TestDependentsTransitive: the open files that load a file through
// another one that is only on disk are its dependents too.
func TestDependentsTransitive(t *testing.T) {
	s := newServer(Options{})
	dir := t.TempDir()
	main, mid, lib := filepath.Join(dir, "main.star"), filepath.Join(dir, "mid.star"), filepath.Join(dir, "lib.star")
	s.docs[main] = s.newDocument(nil, main, string(fileURI(main)), 1, []byte("load(\"mid.star\", \"relay\")\n"))
	s.index[mid] = &indexed{loads: []string{lib}}
	if dep := dependents(s.snapshot(), lib); len(dep) != 1 || dep[0] != main {
		t.Errorf("dependents of lib.star = %v, want main.star", dep)
	}
}
