package starlib_test

import (
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/starlib"
)

// TestCheckArguments: the static argument check reports, in the runtime's
// words, each problem with the argument it concerns, and accepts Unknown
// anywhere.
func TestCheckArguments(t *testing.T) {
	lookup := func(name string) *starlib.Builtin {
		b, ok := starlib.Lookup(name)
		if !ok {
			t.Fatalf("no builtin %s", name)
		}
		return b
	}
	kw := func(pairs ...any) []starlark.Tuple {
		var out []starlark.Tuple
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, starlark.Tuple{starlark.String(pairs[i].(string)), pairs[i+1].(starlark.Value)})
		}
		return out
	}
	perms := starlark.NewDict(2)
	_ = perms.SetKey(starlark.String("filesystm"), starlark.True)
	badFS := starlark.NewDict(1)
	_ = badFS.SetKey(starlark.String("filesystem"), starlark.String("rw"))
	cases := []struct {
		name    string
		builtin string
		args    starlark.Tuple
		kwargs  []starlark.Tuple
		want    []string // message fragments, one per problem
		keyword string   // of the first problem
		value   bool
	}{
		{"unknown keyword", "sandbox", nil, kw("acess", starlark.String("read-only")), []string{`sandbox: unexpected keyword argument "acess" (did you mean "access"?)`}, "acess", false},
		{"enum", "sandbox", nil, kw("access", starlark.String("rw")), []string{`sandbox: access must be "read-only" or "read-write", got "rw"`}, "access", true},
		{"enum suggestion", "workspace", nil, kw("write_concurrency", starlark.String("paralel")), []string{`workspace: write_concurrency must be "serial" or "parallel", got "paralel" (did you mean "parallel"?)`}, "write_concurrency", true},
		{"negative limit", "configure", nil, kw("max_depth", starlark.MakeInt(-1)), []string{`configure: max_depth must be a non-negative integer (0 disables the limit), got -1`}, "max_depth", true},
		{"permissions key", "agent", nil, kw("permissions", perms), []string{`agent: unknown permissions key "filesystm" (did you mean "filesystem"?); valid keys are filesystem, network, shell`}, "permissions", true},
		{"permissions value", "agent", nil, kw("permissions", badFS), []string{`agent: permissions["filesystem"] must be "read-only" or "read-write", got "rw"`}, "permissions", true},
		{"type", "agent", nil, kw("timeout_ms", starlark.String("5")), []string{`agent: timeout_ms must be`}, "timeout_ms", true},
		{"several", "sandbox", nil, kw("acess", starlark.None, "access", starlark.String("x"), "access", starlark.String("y")), []string{"unexpected keyword", "multiple values", "access must be"}, "acess", false},
		{"missing", "use_context", nil, nil, []string{`use_context: missing argument`}, "", false},
		{"unknown values pass", "sandbox", nil, kw("access", starlib.Unknown, "root", starlib.Unknown), nil, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := lookup(c.builtin).CheckArguments(c.args, c.kwargs)
			if len(errs) != len(c.want) {
				t.Fatalf("got %d problems %v, want %d", len(errs), errs, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(errs[i].Msg, w) {
					t.Errorf("problem %d: %q, want it to contain %q", i, errs[i].Msg, w)
				}
			}
			if len(errs) > 0 && (errs[0].Keyword != c.keyword || errs[0].Value != c.value) {
				t.Errorf("first problem concerns keyword %q (value %v), want %q (%v)", errs[0].Keyword, errs[0].Value, c.keyword, c.value)
			}
		})
	}
}
