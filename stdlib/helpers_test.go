package stdlib

import (
	"errors"
	"fmt"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"
)

// fileOptions are the Starlark dialect options used by the tests.
var fileOptions = &syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}

// newThread returns a thread that loads the standard modules and, for
// tests, the starlarktest assert module as "assert.star".
func newThread(t testing.TB) *starlark.Thread {
	thread := &starlark.Thread{
		Name: t.Name(),
		Load: func(_ *starlark.Thread, name string) (starlark.StringDict, error) {
			if name == "assert.star" {
				return starlarktest.LoadAssertModule()
			}
			if globals, ok := Module(name); ok {
				return globals, nil
			}
			return nil, fmt.Errorf("no module %q", name)
		},
	}
	starlarktest.SetReporter(thread, t)
	return thread
}

// exec runs src as a Starlark file and returns its globals.
func exec(t testing.TB, src string) (starlark.StringDict, error) {
	return starlark.ExecFileOptions(fileOptions, newThread(t), t.Name()+".star", src, nil)
}

// runAsserts runs src, which reports failures through the assert module.
func runAsserts(t *testing.T, src string) {
	t.Helper()
	if _, err := exec(t, src); err != nil {
		var evalErr *starlark.EvalError
		if errors.As(err, &evalErr) {
			t.Fatal(evalErr.Backtrace())
		}
		t.Fatal(err)
	}
}

// errorCase is a Starlark expression whose evaluation must fail with msg.
type errorCase struct {
	expr string
	msg  string
}

// checkErrors evaluates each case's expression after the given load
// statements and compares the error message exactly.
func checkErrors(t *testing.T, loads string, cases []errorCase) {
	t.Helper()
	for _, c := range cases {
		_, err := exec(t, loads+"\nx = "+c.expr+"\n")
		var evalErr *starlark.EvalError
		switch {
		case err == nil:
			t.Errorf("%s: succeeded, want error %q", c.expr, c.msg)
		case !errors.As(err, &evalErr):
			t.Errorf("%s: got non-evaluation error %v, want %q", c.expr, err, c.msg)
		case evalErr.Msg != c.msg:
			t.Errorf("%s: got error\n\t%s\nwant\n\t%s", c.expr, evalErr.Msg, c.msg)
		}
	}
}
