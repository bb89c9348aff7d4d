package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

// FuzzNormalize decodes the input into a renderable tree (see treeDecoder),
// evaluates it with a recording echo provider and the default limits, and
// checks the evaluator's contract:
//
//   - it does not panic (nor turn a panic into an "internal evaluator
//     failure" or "panicked" error);
//   - it returns either text or an error, never both;
//   - every error is an *eval.EvaluationError or *eval.ParallelError with a
//     non-empty message, and so is every branch failure of a ParallelError;
//   - a placement, depth or renderability error in a tree without
//     components (so the static check sees all of it) is reported before
//     the provider ran;
//   - two evaluations of the same tree that both succeed render the same
//     text.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{fzAgent, 2, fzString, 3, 'a', 'b', 'c', fzInt, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &treeDecoder{data: data}
		tree := d.value(0)

		var first string
		for round := range 2 {
			p, err := deterministic.New(deterministic.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := eval.New(eval.Options{AgentProvider: p, System: "runtime system"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			text, err := rt.Evaluate(ctx, tree)
			timedOut := ctx.Err() != nil
			cancel()
			if timedOut {
				t.Fatalf("evaluation did not finish within 20s (err: %v)", err)
			}
			if err == nil {
				if round == 0 {
					first = text
				} else if text != first {
					t.Fatalf("non-deterministic result: first %q, then %q", first, text)
				}
				continue
			}
			if round == 1 {
				t.Fatalf("the first evaluation returned %q, the second failed: %v", first, err)
			}
			if text != "" {
				t.Fatalf("Evaluate returned both text %q and error %v", text, err)
			}
			checkEvalError(t, err, 0)
			if !d.dynamic && isStaticError(err) {
				if n := len(p.Calls()); n != 0 {
					t.Fatalf("static error %q was reported after %d provider calls", err, n)
				}
			}
			return
		}
	})
}

// checkEvalError checks that err and every branch failure below it is an
// *eval.EvaluationError or *eval.ParallelError with a non-empty message
// that does not report a recovered panic.
func checkEvalError(t *testing.T, err error, level int) {
	t.Helper()
	if level > 64 {
		t.Fatalf("parallel errors nested more than 64 levels deep")
	}
	msg := err.Error()
	if msg == "" {
		t.Fatalf("error %#v has an empty message", err)
	}
	if strings.Contains(msg, "internal evaluator failure") || strings.Contains(msg, "panicked") {
		t.Fatalf("evaluation recovered a panic: %v", err)
	}
	var (
		ee *eval.EvaluationError
		pe *eval.ParallelError
	)
	switch {
	case errors.As(err, &pe):
		if len(pe.Failures) == 0 || len(pe.Failures) > pe.Branches {
			t.Fatalf("parallel error with %d failures of %d branches: %v", len(pe.Failures), pe.Branches, err)
		}
		last := -1
		for _, bf := range pe.Failures {
			if bf.Index <= last || bf.Index >= pe.Branches {
				t.Fatalf("parallel error failure indexes not ascending within [0,%d): %v", pe.Branches, err)
			}
			last = bf.Index
			if bf.Err == nil {
				t.Fatalf("parallel error branch %d has a nil error", bf.Index)
			}
			checkEvalError(t, bf.Err, level+1)
		}
	case errors.As(err, &ee):
		if ee.Msg == "" {
			t.Fatalf("evaluation error with an empty Msg: %#v", ee)
		}
	default:
		t.Fatalf("error is %T, want *eval.EvaluationError or *eval.ParallelError: %v", err, err)
	}
}

// staticMessages are the messages of errors the static check raises before
// anything runs: placement, depth and renderability.
var staticMessages = []string{
	"is only valid inside agent()",
	"cannot contain another",
	"is not valid inside",
	"requires an enclosing sandbox()",
	"exceeded max_depth",
	"is not renderable",
}

// isStaticError reports whether err is a top-level evaluation error with
// one of the static check's messages.
func isStaticError(err error) bool {
	ee, ok := err.(*eval.EvaluationError)
	if !ok {
		return false
	}
	for _, m := range staticMessages {
		if strings.Contains(ee.Msg, m) {
			return true
		}
	}
	return false
}

// Constructor bytes of treeDecoder (the byte modulo fzKinds).
const (
	fzString = iota
	fzInt
	fzNil
	fzBool
	fzList
	fzAgent
	fzSystem
	fzFollowUp
	fzBlock
	fzFragment
	fzParallel
	fzComponent
	fzMap
	fzStrings
	fzEvaluate
	fzAgentOpts
	fzKinds
)

// Bounds of a decoded tree.
const (
	fzMaxNodes    = 96
	fzMaxDepth    = 24
	fzMaxChildren = 5
	fzMaxString   = 12
)

// treeDecoder turns fuzz bytes into a renderable tree. Each value starts
// with a constructor byte (modulo fzKinds); constructors with children read
// a count byte (modulo fzMaxChildren) and then that many values; strings
// and tags read a length byte (modulo fzMaxString) and then that many
// bytes. A missing byte reads as 0, and the tree is bounded in size and
// depth: past the bounds every value is the string "x".
type treeDecoder struct {
	data  []byte
	i     int
	nodes int
	// dynamic is set when the tree contains a component, whose returned
	// value the static check cannot see in advance.
	dynamic bool
}

func (d *treeDecoder) next() byte {
	if d.i >= len(d.data) {
		return 0
	}
	b := d.data[d.i]
	d.i++
	return b
}

func (d *treeDecoder) str() string {
	n := int(d.next()) % fzMaxString
	var b strings.Builder
	for range n {
		b.WriteByte(d.next())
	}
	return b.String()
}

func (d *treeDecoder) children(depth int) []any {
	n := int(d.next()) % fzMaxChildren
	if n == 0 {
		return nil
	}
	kids := make([]any, n)
	for i := range kids {
		kids[i] = d.value(depth + 1)
	}
	return kids
}

func (d *treeDecoder) pos() eval.Position {
	return eval.Position{File: "fuzz.star", Line: int32(d.nodes), Col: int32(d.i + 1)}
}

func (d *treeDecoder) value(depth int) any {
	if d.i >= len(d.data) || d.nodes >= fzMaxNodes || depth >= fzMaxDepth {
		return "x"
	}
	d.nodes++
	pos := d.pos()
	switch d.next() % fzKinds {
	case fzString:
		return d.str()
	case fzInt:
		return int(int8(d.next()))
	case fzNil:
		return nil
	case fzBool:
		return d.next()%2 == 0
	case fzList:
		kids := d.children(depth)
		if kids == nil {
			return []any{}
		}
		return kids
	case fzAgent:
		return &eval.Agent{Children: d.children(depth), Position: pos}
	case fzSystem:
		return &eval.System{Children: d.children(depth), Position: pos}
	case fzFollowUp:
		return &eval.FollowUp{Children: d.children(depth), Position: pos}
	case fzBlock:
		tag := d.str()
		return &eval.Block{Tag: tag, Children: d.children(depth), Position: pos}
	case fzFragment:
		return &eval.Fragment{Children: d.children(depth), Position: pos}
	case fzParallel:
		return &eval.Parallel{Branches: d.children(depth), Position: pos}
	case fzComponent:
		// A component that returns a sub-tree.
		d.dynamic = true
		sub := d.value(depth + 1)
		return &eval.Component{Name: "Returns", Position: pos, Fn: func(*eval.ComponentContext) (any, error) {
			return sub, nil
		}}
	case fzMap:
		return map[string]any{"key": d.str()}
	case fzStrings:
		return []string{d.str(), d.str()}
	case fzEvaluate:
		// A component that evaluates sub-trees through its context,
		// one at a time or all at once, and returns their text.
		d.dynamic = true
		all := d.next()%2 == 1
		kids := d.children(depth)
		return &eval.Component{Name: "Collects", Position: pos, Fn: func(cc *eval.ComponentContext) (any, error) {
			if all {
				texts, err := cc.EvaluateAll(kids, pos)
				if err != nil {
					return nil, err
				}
				return strings.Join(texts, "|"), nil
			}
			var out []any
			for _, k := range kids {
				s, err := cc.Evaluate(k)
				if err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, nil
		}}
	case fzAgentOpts:
		flags := d.next()
		a := &eval.Agent{Position: pos, Model: d.str(), Name: "fuzz"}
		if flags&1 != 0 {
			a.System = d.str()
		}
		if flags&2 != 0 {
			// cwd without a sandbox is a placement error.
			a.Cwd = "sub"
		}
		if flags&4 != 0 {
			// Long enough never to expire under a loaded fuzzer.
			a.TimeoutMS = 60_000
		}
		if flags&8 != 0 {
			a.Permissions = &eval.Permissions{Filesystem: "read-only"}
		}
		a.Children = d.children(depth)
		return a
	}
	panic("unreachable")
}
