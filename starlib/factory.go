package starlib

import (
	"errors"
	"fmt"
	"reflect"
	"sort"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

// FactoryCall is the call of a provider factory (acp_agent(),
// local_sandbox(), s3_workspace(), …) as it can travel to another
// process: the builtin's name and its arguments as JSON-like data. A
// Temporal worker makes a provider that a component body made while the
// run evaluated (which loading the file does not make again) from it,
// with MakeProvider. A FactoryCall is a value: it is not modified once
// made.
type FactoryCall struct {
	// Builtin is the factory's name.
	Builtin string `json:"builtin"`
	// Args and Kwargs are the call's arguments (JSON-like data: nil,
	// bool, string, int64, float64, []any, map[string]any).
	Args   []any          `json:"args,omitempty"`
	Kwargs map[string]any `json:"kwargs,omitempty"`
	// Pos is where the call was authored.
	Pos string `json:"pos"`
}

// made records how each provider of the workflow was made.
type madeBy struct {
	call *FactoryCall
	// why, when call is nil, says why the call cannot travel.
	why string
}

// recordFactory remembers the call that made provider p.
func (e *env) recordFactory(p any, name string, args starlark.Tuple, kwargs []starlark.Tuple, pos eval.Position) {
	if p == nil || !reflect.TypeOf(p).Comparable() {
		return
	}
	fc := &FactoryCall{Builtin: name, Pos: pos.String()}
	m := madeBy{call: fc}
	for i, a := range args {
		g, err := toGo(a)
		if err != nil {
			m = madeBy{why: fmt.Sprintf("its argument #%d is a %s, which is not data", i+1, a.Type())}
			break
		}
		fc.Args = append(fc.Args, g)
	}
	for _, kv := range kwargs {
		if m.call == nil {
			break
		}
		k, _ := starlark.AsString(kv[0])
		g, err := toGo(kv[1])
		if err != nil {
			m = madeBy{why: fmt.Sprintf("its argument %s= is a %s, which is not data", k, kv[1].Type())}
			break
		}
		if fc.Kwargs == nil {
			fc.Kwargs = map[string]any{}
		}
		fc.Kwargs[k] = g
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.made == nil {
		e.made = map[any]madeBy{}
	}
	e.made[p] = m
}

// FactoryCall returns the factory call that made provider p (an
// eval.AgentProvider, eval.SandboxProvider or eval.WorkspaceProvider a
// builtin of the workflow returned), or an error that says why it
// cannot travel: p was not made by a factory of this workflow (a Go
// provider), or an argument of its call is not data (a function).
func (w *Workflow) FactoryCall(p any) (*FactoryCall, error) {
	if p == nil || !reflect.TypeOf(p).Comparable() {
		return nil, errors.New("it is a Go value, not made by a factory of the workflow")
	}
	w.env.mu.Lock()
	m, ok := w.env.made[p]
	w.env.mu.Unlock()
	switch {
	case !ok:
		return nil, errors.New("it is a Go value, not made by a factory of the workflow")
	case m.call == nil:
		return nil, errors.New(m.why)
	}
	return m.call, nil
}

// MakeProvider calls the factory of fc, with the surface of opts (its
// Extensions), its environment (Env) and its directory for relative
// paths (Dir), and returns the provider it makes: an eval.AgentProvider,
// eval.SandboxProvider or eval.WorkspaceProvider.
func MakeProvider(fc *FactoryCall, opts LoadOptions) (any, error) {
	pre, err := predeclaredWith(opts.Extensions)
	if err != nil {
		return nil, err
	}
	fn, ok := pre[fc.Builtin].(*starlark.Builtin)
	if !ok {
		return nil, fmt.Errorf("%s: %s() is not a provider factory of this process (is it an extension this worker does not link?)", fc.Pos, fc.Builtin)
	}
	e := &env{opts: opts, modules: map[string]*module{}, predeclared: pre}
	th := &starlark.Thread{Name: "make " + fc.Builtin, Print: e.print}
	th.SetLocal(keyEnv, e)
	args := make(starlark.Tuple, len(fc.Args))
	for i, a := range fc.Args {
		args[i] = fromGo(a)
	}
	keys := make([]string, 0, len(fc.Kwargs))
	for k := range fc.Kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kwargs := make([]starlark.Tuple, len(keys))
	for i, k := range keys {
		kwargs[i] = starlark.Tuple{starlark.String(k), fromGo(fc.Kwargs[k])}
	}
	v, err := starlark.Call(th, fn, args, kwargs)
	if err != nil {
		return nil, fmt.Errorf("%s: %s(): %w", fc.Pos, fc.Builtin, err)
	}
	switch x := v.(type) {
	case *AgentProviderValue:
		return x.Provider, nil
	case *SandboxProviderValue:
		return x.Provider, nil
	case *WorkspaceProviderValue:
		return x.Provider, nil
	}
	return nil, fmt.Errorf("%s: %s() returned a %s, not a provider", fc.Pos, fc.Builtin, v.Type())
}
