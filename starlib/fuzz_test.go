package starlib_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/starlib"
)

// argPool are the Starlark literals the fuzzer passes as arguments. The
// order is part of the corpus format: append, do not reorder.
var argPool = []string{
	`""`,
	`" "`,
	`"\n\t "`,
	`"x"`,
	`"Hello, AML"`,
	`"read-only"`,
	`"Personal Data"`,
	`0`,
	`1`,
	`-1`,
	`42`,
	`2147483648`,
	`-9223372036854775809`,
	`99999999999999999999999999`,
	`1.5`,
	`None`,
	`True`,
	`False`,
	`{}`,
	`{"filesystem": "read-only", "network": False}`,
	`{"network": 1}`,
	`{1: 2}`,
	`{"bogus": True}`,
	`[]`,
	`["a", "b"]`,
	`[None, True, 3]`,
	`("t", agent("in tuple"))`,
	`[[["deep"]]]`,
	`agent("x")`,
	`agent("p", follow_up("f"))`,
	`system("s")`,
	`follow_up("f")`,
	`block("b", tag = "T")`,
	`fragment("f", system("fs"))`,
	`parallel(agent("a"), agent("b"))`,
	`lambda req: "r"`,
	`lambda: "c"`,
	`lambda req: {"text": "t", "messages": ["m"]}`,
	`lambda req: 1`,
	`lambda: agent("from lambda")`,
	`deterministic_agent()`,
	`deterministic_agent(respond = lambda req: req.prompt + "!")`,
	`deterministic_agent(respond = lambda req: {"text": 1})`,
	`component(lambda: agent("c"))()`,
	`component(lambda: system("s"))()`,
	`component(lambda: evaluate(agent("e")))()`,
	`struct(a = 1)`,
	`json.encode({"a": [1, 2]})`,
	`set([1])`,
	`print`,
	`evaluate`,
	`"` + strings.Repeat("long ", 50) + `"`,
	`(("a",), ("b", agent("c")))`,
	`[("t",), [("u", ("v",))]]`,
	`{"text": "t"}.items()`,
	`range(3)`,
}

// fuzzCall decodes the input into one call of a catalog builtin. The input
// is an optional builtin name followed by ':' (which makes corpus files
// independent of the catalog's order) or a byte indexing the catalog, then
// a positional count byte (modulo 4) and that many pool bytes, then a
// keyword count byte (modulo 4) and that many (name, pool) byte pairs. A
// name byte picks a non-variadic parameter; 0xff picks an unknown keyword.
// Missing bytes read as 0.
func fuzzCall(data []byte) (*starlib.Builtin, string) {
	cat := starlib.Catalog()
	var b *starlib.Builtin
	if i := bytes.IndexByte(data, ':'); i > 0 {
		if bi, ok := starlib.Lookup(string(data[:i])); ok {
			b, data = bi, data[i+1:]
		}
	}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		c := data[0]
		data = data[1:]
		return int(c)
	}
	if b == nil {
		b = cat[next()%len(cat)]
	}
	var named []string
	for _, p := range b.Params {
		if !p.Variadic {
			named = append(named, p.Name)
		}
	}
	var args []string
	for range next() % 4 {
		args = append(args, argPool[next()%len(argPool)])
	}
	for range next() % 4 {
		nb := next()
		name := "bogus_keyword"
		if nb != 0xff && len(named) > 0 {
			name = named[nb%len(named)]
		}
		args = append(args, name+" = "+argPool[next()%len(argPool)])
	}
	return b, b.Name + "(" + strings.Join(args, ", ") + ")"
}

// FuzzBuiltinArgs calls a catalog builtin with arbitrary arguments, once
// inside main() and once at top level, and evaluates the workflow with a
// deterministic provider. Invariants: nothing panics (neither directly nor
// as a recovered "panicked"/"internal evaluator failure" error), every
// error has a message, and every error of the evaluation (after a
// successful load) is an *eval.EvaluationError or *eval.ParallelError.
func FuzzBuiltinArgs(f *testing.F) {
	f.Add([]byte("agent:\x01\x03\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, call := fuzzCall(data)
		tail := "x"
		if b.Name == "configure" {
			// configure() at top level returns None; give the limits and
			// the provider something to act on.
			tail = `agent("configured")`
		}
		for _, src := range []string{
			"def main():\n    return " + call + "\n",
			"x = " + call + "\n\ndef main():\n    return " + tail + "\n",
		} {
			checkWorkflow(t, src)
		}
	})
}

func checkWorkflow(t *testing.T, src string) {
	t.Helper()
	w, err := starlib.LoadFile("fuzz.star", starlib.LoadOptions{
		Source: []byte(src),
		Env: func(name string) (string, bool) {
			if name == "x" {
				return "from env", true
			}
			return "", false
		},
		Print: func(string) {},
	})
	if err != nil {
		checkMessage(t, src, err)
		var le *starlib.LoadError
		if !errors.As(err, &le) {
			t.Fatalf("load error is %T, want *starlib.LoadError: %v\n%s", err, err, src)
		}
		return
	}
	p, err := deterministic.New(deterministic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := w.Evaluate(ctx, "main", eval.Options{AgentProvider: p})
	if ctx.Err() != nil {
		t.Fatalf("evaluation did not finish within 5s (err: %v)\n%s", err, src)
	}
	if err == nil {
		return
	}
	if text != "" {
		t.Fatalf("Evaluate returned both text %q and error %v\n%s", text, err, src)
	}
	checkMessage(t, src, err)
	var (
		ee *eval.EvaluationError
		pe *eval.ParallelError
	)
	if !errors.As(err, &ee) && !errors.As(err, &pe) {
		t.Fatalf("evaluation error is %T, want *eval.EvaluationError or *eval.ParallelError: %v\n%s", err, err, src)
	}
}

func checkMessage(t *testing.T, src string, err error) {
	t.Helper()
	msg := err.Error()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("error %#v has an empty message\n%s", err, src)
	}
	if strings.Contains(msg, "internal evaluator failure") || strings.Contains(msg, "panicked") {
		t.Fatalf("a panic was recovered: %v\n%s", err, src)
	}
}
