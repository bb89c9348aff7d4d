package lsp

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/protocol"
)

// TestWorkspaceSymbols: symbols of files that are not open come from the
// index built after initialized.
func TestWorkspaceSymbols(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.star":         "def review_lane():\n    return 1\n\nLANES = [1]\n",
		"sub/b.star":     "def other_review():\n    return 2\n",
		".hidden/c.star": "def review_hidden():\n    return 3\n",
	})
	c := startClient(t, Options{})
	c.initialize(dir, false)
	var names []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) { // the index is built in the background
		var syms []protocol.SymbolInformation
		c.mustCall(protocol.MethodWorkspaceSymbol, &protocol.WorkspaceSymbolParams{Query: "REVIEW"}, &syms)
		names = names[:0]
		for _, s := range syms {
			names = append(names, s.Name+"@"+filepath.Base(docPath(string(s.Location.URI)))+":"+posText(s.Location.Range.Start))
		}
		if len(names) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(names)
	if want := "other_review@b.star:1:5,review_lane@a.star:1:5"; strings.Join(names, ",") != want {
		t.Errorf("workspace symbols %v, want %s (hidden directories are not indexed)", names, want)
	}
	c.shutdown()
}

// TestRangeFormatting: only the changes that touch the range are made.
func TestRangeFormatting(t *testing.T) {
	text := "def a( ):\n  return 1\n\ndef b( ):\n  return 2\n"
	dir := t.TempDir()
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "f.star"), text)
	var edits []protocol.TextEdit
	c.mustCall(protocol.MethodTextDocumentRangeFormatting, &protocol.DocumentRangeFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u},
		Range: protocol.Range{Start: protocol.Position{Line: 3}, End: protocol.Position{Line: 4, Character: 3}}}, &edits)
	if got, want := applyEdits(t, text, edits), "def a( ):\n  return 1\n\ndef b():\n    return 2\n"; got != want {
		t.Errorf("range formatting gave\n%s\nwant\n%s", got, want)
	}
	c.mustCall(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &edits)
	if got, want := applyEdits(t, text, edits), "def a():\n    return 1\n\ndef b():\n    return 2\n"; got != want {
		t.Errorf("formatting gave\n%s\nwant\n%s", got, want)
	}
	c.shutdown()
}
