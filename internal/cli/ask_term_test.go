package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/aml-go/aml/eval"
)

// TestAskOnTerminal: without a journal, ask() asks on the terminal. A
// yes/no question takes y/yes/n/no, an answer of the wrong type is
// explained and asked again, and free text is taken as typed.
func TestAskOnTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: cannot open a pseudo-terminal on this machine (%v)", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	stdin := os.Stdin
	os.Stdin = tty
	defer func() { os.Stdin = stdin }()
	var prompts bytes.Buffer
	ask := terminalAsk(&prompts)

	// Typed ahead: the second question's answer too.
	if _, err := ptmx.WriteString("maybe\nyes\nRelease 2\n"); err != nil {
		t.Fatal(err)
	}
	q := eval.Question{ID: "publish", Text: "Publish?", Schema: map[string]any{"type": "boolean"}}
	got, err := ask(context.Background(), q)
	if err != nil || got != true {
		t.Fatalf("yes/no question answered maybe, then yes: %v, %v", got, err)
	}
	out := prompts.String()
	if strings.Count(out, `? Publish? [JSON matching {"type":"boolean"}]`) != 2 || !strings.Contains(out, `the answer to question "publish" is not JSON`) {
		t.Fatalf("the terminal showed:\n%s", out)
	}

	got, err = ask(context.Background(), eval.Question{ID: "title", Text: "Title?"})
	if err != nil || got != "Release 2" {
		t.Fatalf("free text: %v, %v", got, err)
	}
}

// TestAskWithoutTerminal: with stdin not a terminal, ask() fails and says
// how to answer instead.
func TestAskWithoutTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin }()
	_, err = terminalAsk(&bytes.Buffer{})(context.Background(), eval.Question{ID: "x", Text: "X?"})
	if err == nil || !strings.Contains(err.Error(), "stdin is not a terminal; run with --journal DIR") {
		t.Fatalf("ask without a terminal: %v", err)
	}
}
