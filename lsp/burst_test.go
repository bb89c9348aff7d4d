package lsp

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/protocol"
)

// TestEditBurst: 500 edits of a 2,000-line file sent back to back, full
// and incremental by turns, then a hover: the hover answers within a
// second of the last edit and for the last text, the last version's
// diagnostics arrive, and no diagnostics of an older version are
// published after a newer one.
func TestEditBurst(t *testing.T) {
	dir, text := genWorkspace(t, 20, 2000)
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "main.star"), text)
	c.diagnostics(u, 1)

	// Every text but the last has an unknown keyword on its last line;
	// the last one defines final_step there instead.
	bad := "def main():\n    return parallel([step_0(\"a\"), step_1(\"b\")])\n"
	if !strings.HasSuffix(text, bad) {
		t.Fatal("the generated workflow does not end in main()")
	}
	base := strings.TrimSuffix(text, bad)
	version := int32(1)
	var last time.Time
	for i := range 500 {
		version++
		tail := "x = sandbox(acess = \"read-only\")\n"
		if i == 499 {
			tail = "def final_step():\n    return sandbox(access = \"read-only\")\n"
		}
		last = time.Now()
		if i%2 == 0 {
			change(c, u, version, base+tail)
			continue
		}
		// Incremental: replace the line after base (the previous tail).
		c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
			"textDocument": map[string]any{"uri": u, "version": version},
			"contentChanges": []map[string]any{{
				"range": protocol.Range{Start: protocol.Position{Line: uint32(lineCount(base))}, End: protocol.Position{Line: uint32(lineCount(base) + 1)}},
				"text":  tail,
			}},
		})
	}
	h, err := hoverAt(c, u, uint32(lineCount(base)+1), 12)
	took := time.Since(last)
	if err != nil || h == nil || !strings.Contains(h.Contents.Value, "sandbox(") {
		t.Fatalf("hover over the last text's sandbox: %v, %v", h, err)
	}
	if took > time.Second {
		t.Errorf("the hover answered %v after the last edit, want under 1s", took)
	}
	if got := codes(c.diagnostics(u, version)); got != "" {
		t.Errorf("diagnostics of the last version: %s, want none", got)
	}
	c.mu.Lock()
	vs := c.published[u]
	c.mu.Unlock()
	for i := 1; i < len(vs); i++ {
		if vs[i] < vs[i-1] {
			t.Fatalf("diagnostics of version %d published after version %d: %v", vs[i], vs[i-1], vs)
		}
	}
	t.Logf("hover %v after the last edit; %d publications for 501 versions", took, len(vs))
}
