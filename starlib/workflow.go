package starlib

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
	"github.com/aml-go/aml/providers/sandbox/local"
	"github.com/aml-go/aml/stdlib"
)

// FileOptions is the one Starlark dialect of AML, shared by the runtime,
// `aml check` and the language server: sets, top-level if/for and
// recursion are allowed; while loops and global reassignment are not, so
// every workflow can be formatted by standard Starlark tooling.
var FileOptions = &syntax.FileOptions{Set: true, TopLevelControl: true, Recursion: true}

// LoadOptions configure loading a workflow.
type LoadOptions struct {
	// Env looks up variables for env(); nil uses os.LookupEnv.
	Env func(name string) (string, bool)
	// Print receives print() output; nil writes lines to os.Stderr.
	Print func(msg string)
	// Source, when non-nil, is the entry file's content instead of what is
	// on disk.
	Source []byte
	// FS, when non-nil, is where the entry file and the modules it loads
	// are read from (paths are slash-separated and relative to the FS
	// root, as io/fs wants); nil reads the operating system's files. It
	// does not change where providers, include(src=) and skill() read:
	// those are runtime paths (eval.Options.Cwd).
	FS fs.FS
	// Dir is the directory from which the relative paths given to
	// provider factories (a workspace's directory, a sandbox's
	// workspace, an agent's working directory) resolve; "" is the
	// process's working directory. A Temporal worker that makes a run's
	// providers sets it to the submitter's.
	Dir string
	// Context, when non-nil, cancels the load: top-level code (and the
	// modules it loads) stops with its cause once it is done.
	Context context.Context
	// Extensions add builtins to the Starlark surface: provider families
	// with their own dependencies (the ACP agents of starlib/acpstar, the
	// persistent workspace of starlib/fsstar) and an embedder's own Go
	// builtins. A name already predeclared is a load error.
	Extensions []*Extension
	// EnvDigestKey keys the digests of env() values that a journaled
	// evaluation records (see Workflow.Reads): HMAC-SHA256 under the key,
	// truncated and encoded as eval.Fingerprint is, so that a copy of the
	// journal does not give a short value away to a brute-force search.
	// Nil digests with SHA-256 alone (eval.Fingerprint). A resumed run
	// checks its reads only when loaded with the key the run was recorded
	// with (see eval.ResumeOptions.UncheckedReads). The CLI keeps its key
	// outside the journal (journal.LoadKey).
	EnvDigestKey []byte
}

// Config is what the entry file set with configure(). Nil pointers and
// nil slices mean "not set".
type Config struct {
	AgentProvider     eval.AgentProvider
	SandboxProvider   eval.SandboxProvider
	WorkspaceProvider eval.WorkspaceProvider
	System            *string
	AllowedTools      []string
	AllowedMCPServers []string
	// The limits keep configure()'s convention: 0 disables a limit
	// (Workflow.Limits converts them to eval.Limits).
	MaxAgentCalls       *int
	MaxConcurrentAgents *int
	MaxDepth            *int
	MaxTurnsPerAgent    *int
	MaxSteps            *int
	MaxPromptBytes      *int
	// Budget is configure(budget=), or nil.
	Budget *eval.Budget
	// Prices is configure(prices=), or nil.
	Prices map[string]eval.Price
	// RateLimits is configure(rate_limits=), or nil: the limits of the
	// model gateway's upstreams (gateway.Gateway.SetLimits), which the
	// CLI applies to its process's gateway.
	RateLimits map[string]gateway.Limit
	// RateLimitRetry is configure(rate_limit_retry=), or nil: how the
	// model gateway and the evaluator retry a rate limit.
	RateLimitRetry *eval.RateLimitRetry
	// Pos is where configure() was called.
	Pos eval.Position
}

// LoadError reports a workflow that could not be loaded: a missing file,
// a syntax or resolve error, or a failure while executing top-level code.
type LoadError struct {
	File string
	Err  error
	// Backtrace is the Starlark backtrace when top-level code failed.
	Backtrace string
}

// Error implements error.
func (e *LoadError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// Workflow is a loaded workflow file: its frozen globals and its
// configuration. A Workflow may be evaluated any number of times,
// concurrently.
type Workflow struct {
	// File is the entry file as given.
	File string
	// Globals are the file's frozen global values.
	Globals starlark.StringDict
	// Config is what configure() set.
	Config Config
	env    *env
	// loaded, loadedTools, loadedMCP, loadedSandboxes and
	// loadedWorkspaces count the providers, tools, MCP servers, sandbox
	// and workspace providers made while the workflow loaded.
	loaded, loadedTools, loadedMCP, loadedSandboxes, loadedWorkspaces int
}

// env is the shared state of one workflow: options, the module cache and
// the configuration being collected.
type env struct {
	opts  LoadOptions
	entry string
	// predeclared is the surface of this workflow: the core builtins and
	// those of its extensions.
	predeclared starlark.StringDict

	mu      sync.Mutex
	modules map[string]*module

	config     Config
	configured bool
	// reads are the env() values read while the workflow loaded, as
	// digests (see Workflow.Reads).
	reads []eval.RecordedRead
	// secrets are the values env() returned and the credential
	// arguments given (see Workflow.Secrets).
	secrets map[string]bool
	// providers are the agent providers the workflow's builtins made, in
	// the order they were made (see Workflow.AgentProviders).
	providers []eval.AgentProvider
	// tools are the tools define_tool() made, in order (see
	// Workflow.Tools).
	tools []*eval.Tool
	// mcpServers are the servers define_mcp_server() made, in order (see
	// Workflow.MCPServers).
	mcpServers []*eval.MCPServer
	// sandboxes and workspaces are the sandbox and workspace providers
	// the workflow's builtins made, in order (see
	// Workflow.SandboxProviders).
	sandboxes  []eval.SandboxProvider
	workspaces []eval.WorkspaceProvider
	// made records the factory call of each provider (see
	// Workflow.FactoryCall).
	made map[any]madeBy
}

func (e *env) addSandbox(p eval.SandboxProvider) {
	e.mu.Lock()
	e.sandboxes = append(e.sandboxes, p)
	e.mu.Unlock()
}

func (e *env) addWorkspace(p eval.WorkspaceProvider) {
	e.mu.Lock()
	e.workspaces = append(e.workspaces, p)
	e.mu.Unlock()
}

func (e *env) addMCPServer(s *eval.MCPServer) {
	e.mu.Lock()
	e.mcpServers = append(e.mcpServers, s)
	e.mu.Unlock()
}

func (e *env) addProvider(p eval.AgentProvider) {
	e.mu.Lock()
	e.providers = append(e.providers, p)
	e.mu.Unlock()
}

func (e *env) addTool(t *eval.Tool) {
	e.mu.Lock()
	e.tools = append(e.tools, t)
	e.mu.Unlock()
}

type module struct {
	globals starlark.StringDict
	err     error
	loading bool
}

// LoadFile executes a workflow file and returns its globals and
// configuration. Syntax, resolve and top-level errors are returned as a
// *LoadError naming file:line:col.
func LoadFile(path string, opts LoadOptions) (*Workflow, error) {
	pre, err := predeclaredWith(opts.Extensions)
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	e := &env{opts: opts, entry: path, modules: map[string]*module{}, predeclared: pre}
	src := any(nil)
	switch {
	case opts.Source != nil:
		src = opts.Source
	case opts.FS != nil:
		data, err := fs.ReadFile(opts.FS, path)
		if err != nil {
			return nil, &LoadError{File: path, Err: fmt.Errorf("cannot read workflow: %w", err)}
		}
		src = data
	default:
		data, err := ReadSource(path)
		if err != nil {
			return nil, &LoadError{File: path, Err: fmt.Errorf("cannot read workflow: %w", err)}
		}
		src = data
	}
	// The entry is registered as loading so that a module loading it back
	// is reported as a cycle instead of executing the entry twice.
	key := e.moduleKey(path)
	entry := &module{loading: true}
	e.modules[key] = entry
	th := &starlark.Thread{Name: "load " + path, Print: e.print, Load: e.load}
	th.SetLocal(keyEnv, e)
	th.SetLocal(keyModule, []string{key})
	defer e.cancelWith(th)()
	globals, err := starlark.ExecFileOptions(FileOptions, th, path, src, pre)
	e.mu.Lock()
	entry.globals, entry.err, entry.loading = globals, err, false
	e.mu.Unlock()
	if err != nil {
		return nil, loadError(path, suggestNames(err, path, src, pre))
	}
	e.mu.Lock()
	w := &Workflow{File: path, Globals: globals, Config: e.config, env: e, loaded: len(e.providers), loadedTools: len(e.tools),
		loadedMCP: len(e.mcpServers), loadedSandboxes: len(e.sandboxes), loadedWorkspaces: len(e.workspaces)}
	e.mu.Unlock()
	return w, nil
}

// SandboxProviders returns the sandbox providers that the workflow's
// builtins (local_sandbox(), docker_sandbox(), …) made while it loaded, in
// order, as AgentProviders does for agent providers: a Temporal worker
// that loads the bundle again acquires a sandbox with the provider the
// workflow chose, made with its own environment.
func (w *Workflow) SandboxProviders() []eval.SandboxProvider {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]eval.SandboxProvider(nil), w.env.sandboxes[:w.loadedSandboxes]...)
}

// WorkspaceProviders returns the workspace providers the workflow's
// builtins made while it loaded, in order, as SandboxProviders does.
func (w *Workflow) WorkspaceProviders() []eval.WorkspaceProvider {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]eval.WorkspaceProvider(nil), w.env.workspaces[:w.loadedWorkspaces]...)
}

// MCPServers returns the servers define_mcp_server() made while the
// workflow loaded, in order, as AgentProviders does for providers: a
// worker that loads the bundle again grants a session the server the
// workflow granted, with the transport its own environment makes.
func (w *Workflow) MCPServers() []*eval.MCPServer {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]*eval.MCPServer(nil), w.env.mcpServers[:w.loadedMCP]...)
}

// Tools returns the tools define_tool() made while the workflow loaded,
// in the order they were made, as AgentProviders does for providers: a
// worker that loads the bundle again finds a granted tool by its ordinal
// and runs its execute function itself.
func (w *Workflow) Tools() []*eval.Tool {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]*eval.Tool(nil), w.env.tools[:w.loadedTools]...)
}

// AgentProviders returns the agent providers that the workflow's
// provider factories (deterministic_agent(), acp_agent(), …) made while
// it loaded, in the order they were made: the same sources loaded with
// the same env() values make the same list, so an ordinal names one
// provider across processes (a Temporal worker loads the bundle again to
// run a session with the provider the workflow chose). Providers made
// later, in component bodies, are not listed.
func (w *Workflow) AgentProviders() []eval.AgentProvider {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]eval.AgentProvider(nil), w.env.providers[:w.loaded]...)
}

func loadError(path string, err error) *LoadError {
	le := &LoadError{File: path, Err: err}
	var se *starlark.EvalError
	if errors.As(err, &se) {
		inner := innermost(se)
		le.Backtrace = inner.Backtrace()
		pos := starlarkPos(inner, eval.Position{File: path})
		msg := se.Msg
		if inner != se {
			// A failure inside a loaded module: name the module's position
			// and keep the chain of loads in the message.
			msg = inner.Msg + " (loaded from " + starlarkPos(se, eval.Position{File: path}).String() + ")"
		}
		le.Err = &eval.EvaluationError{Msg: msg, Pos: pos, Backtrace: inner.Backtrace(), Err: unwrapCause(inner)}
	}
	return le
}

// cancelWith cancels a load thread when LoadOptions.Context is done; the
// returned function stops that.
func (e *env) cancelWith(th *starlark.Thread) func() {
	ctx := e.opts.Context
	if ctx == nil {
		return func() {}
	}
	if eval.Paced(ctx) {
		// Workflow code: the thread pauses, and stops, at step counts.
		return meter(th, ctx)
	}
	stop := context.AfterFunc(ctx, func() {
		reason := "load cancelled"
		if cause := context.Cause(ctx); cause != nil {
			reason = cause.Error()
		}
		th.Cancel(reason)
	})
	return func() { stop() }
}

// moduleKey identifies a module file: its absolute path, or its clean
// path within LoadOptions.FS.
func (e *env) moduleKey(p string) string {
	if e.opts.FS != nil {
		return path.Clean(p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func (e *env) print(th *starlark.Thread, msg string) {
	if cc := componentOf(th); cc != nil && eval.DryRun(cc.Context()) {
		return // Resume's dry replay prints nothing
	}
	if e.opts.Print != nil {
		e.opts.Print(msg)
		return
	}
	fmt.Fprintln(os.Stderr, msg)
}

func (e *env) lookupEnv(name string) (string, bool) {
	if e.opts.Env != nil {
		return e.opts.Env(name)
	}
	return os.LookupEnv(name)
}

// load implements load(): @std modules from the standard library, other
// modules by path relative to the loading file, each executed once per
// workflow on its own thread. A module that is still loading when it is
// requested again forms a cycle, reported with the whole chain.
func (e *env) load(thread *starlark.Thread, name string) (starlark.StringDict, error) {
	if strings.HasPrefix(name, "@") {
		if m, ok := stdlib.Module(name); ok {
			return m, nil
		}
		return nil, fmt.Errorf("unknown standard module %q (available: %s)", name, strings.Join(stdlib.Names(), ", "))
	}
	from := thread.CallFrame(0).Pos.Filename()
	var file string
	if e.opts.FS != nil {
		// io/fs paths: slash-separated, relative to the FS root.
		file = path.Join(path.Dir(from), name)
	} else {
		file = ModuleFile(from, name)
	}
	key := e.moduleKey(file)
	chain, _ := thread.Local(keyModule).([]string)

	e.mu.Lock()
	m, ok := e.modules[key]
	if ok && m.loading {
		e.mu.Unlock()
		return nil, errors.New(LoadCycle(chain, key))
	}
	if ok {
		e.mu.Unlock()
		return m.globals, m.err
	}
	m = &module{loading: true}
	e.modules[key] = m
	e.mu.Unlock()

	th := &starlark.Thread{Name: "load " + file, Print: e.print, Load: e.load}
	th.SetLocal(keyEnv, e)
	th.SetLocal(keyModule, append(append([]string(nil), chain...), key))
	defer e.cancelWith(th)()
	var globals starlark.StringDict
	var err error
	if src, rerr := e.readModule(file); rerr != nil {
		err = fmt.Errorf("cannot read module: %w", rerr)
	} else {
		globals, err = starlark.ExecFileOptions(FileOptions, th, file, src, e.predeclared)
		err = suggestNames(err, file, src, e.predeclared)
	}

	e.mu.Lock()
	m.globals, m.err, m.loading = globals, err, false
	e.mu.Unlock()
	return globals, err
}

// ModuleFile returns the file that load(name) names in the module file
// from: an absolute name as it is, else name relative to from's
// directory. (A name starting with "@" is a standard module, not a file.)
func ModuleFile(from, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(from), name)
}

// readModule returns the source of a module file: its bytes from
// LoadOptions.FS, or from the file (ReadSource: a regular file of
// bounded size).
func (e *env) readModule(file string) (any, error) {
	if e.opts.FS != nil {
		data, err := fs.ReadFile(e.opts.FS, file)
		if err != nil {
			return nil, err
		}
		return data, nil
	}
	data, err := ReadSource(file)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// LoadCycle is the error text of a load() that closes a cycle: key is
// the module loaded again and chain the modules being loaded, outermost
// first.
func LoadCycle(chain []string, key string) string { return "load cycle: " + cycleText(chain, key) }

func cycleText(chain []string, key string) string {
	start := 0
	for i, c := range chain {
		if c == key {
			start = i
		}
	}
	names := make([]string, 0, len(chain)-start+1)
	for _, c := range chain[start:] {
		names = append(names, filepath.Base(c))
	}
	return strings.Join(append(names, filepath.Base(key)), " -> ")
}

// Entry returns the value to evaluate for the global name ("" means
// "main"). A callable is returned as the entry component (it runs with no
// arguments and may call evaluate()); any other global must be
// renderable. A missing name is an error listing the candidates.
func (w *Workflow) Entry(name string) (any, error) {
	if name == "" {
		name = "main"
	}
	v, ok := w.Globals[name]
	if !ok {
		cands := w.Candidates()
		hint := "define `def " + name + "():` returning the workflow"
		if len(cands) > 0 {
			hint += ", or choose one with --entry NAME (candidates: " + strings.Join(cands, ", ") + ")"
		}
		return nil, &LoadError{File: w.File, Err: fmt.Errorf("%s: no global named %q to run; %s", w.File, name, hint)}
	}
	switch v := v.(type) {
	case *ComponentValue:
		return &eval.Component{Name: v.name, Entry: true, Position: v.pos, Fn: w.env.componentBody(v.fn, nil, nil, v.name, v.pos)}, nil
	case starlark.Callable:
		pos := eval.Position{File: w.File}
		if f, ok := v.(*starlark.Function); ok {
			pos = toPos(f.Position())
		}
		return &eval.Component{Name: name, Entry: true, Position: pos, Fn: w.env.componentBody(v, nil, nil, name, pos)}, nil
	}
	r, err := toRenderable(v, fmt.Sprintf("global %q", name))
	if err != nil {
		return nil, &LoadError{File: w.File, Err: fmt.Errorf("%s: %w", w.File, err)}
	}
	return r, nil
}

// Candidates lists the globals that can be an entry: callables and
// renderable values, sorted.
func (w *Workflow) Candidates() []string {
	var names []string
	for name, v := range w.Globals {
		switch v.(type) {
		case starlark.Callable:
			if _, builtin := v.(*starlark.Builtin); builtin {
				continue
			}
			names = append(names, name)
		default:
			if _, err := toRenderable(v, ""); err == nil {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// Limits returns the built-in default limits overridden by configure(),
// as eval.Limits values: a limit that configure() set to 0 is
// eval.Unlimited.
func (w *Workflow) Limits() eval.Limits {
	l := eval.DefaultLimits()
	c := w.Config
	for _, f := range []struct {
		dst *int
		src *int
	}{
		{&l.MaxAgentCalls, c.MaxAgentCalls},
		{&l.MaxConcurrentAgents, c.MaxConcurrentAgents},
		{&l.MaxDepth, c.MaxDepth},
		{&l.MaxTurnsPerAgent, c.MaxTurnsPerAgent},
		{&l.MaxSteps, c.MaxSteps},
		{&l.MaxPromptBytes, c.MaxPromptBytes},
	} {
		if f.src != nil {
			*f.dst = SurfaceLimit(*f.src)
		}
	}
	return l
}

// ApplyConfig fills the options that opts leaves unset from configure():
// the default agent provider, the system text, the limits and the
// allow-lists; and the host runtime of script() outside a sandbox, which
// is DefaultHost unless opts names one. Options the
// caller set win, as CLI flags and Go options do.
func (w *Workflow) ApplyConfig(opts *eval.Options) {
	if opts.AgentProvider == nil {
		opts.AgentProvider = w.Config.AgentProvider
	}
	if opts.SandboxProvider == nil {
		opts.SandboxProvider = w.Config.SandboxProvider
	}
	if opts.WorkspaceProvider == nil {
		opts.WorkspaceProvider = w.Config.WorkspaceProvider
	}
	if opts.Host == nil {
		opts.Host = DefaultHost()
	}
	if opts.System == "" && w.Config.System != nil {
		opts.System = *w.Config.System
	}
	if opts.Limits == nil {
		l := w.Limits()
		opts.Limits = &l
	}
	if opts.Budget == nil && w.Config.Budget != nil {
		b := *w.Config.Budget
		opts.Budget = &b
	}
	if opts.Prices == nil {
		opts.Prices = w.Config.Prices
	}
	if opts.RateLimitRetry == nil {
		opts.RateLimitRetry = w.Config.RateLimitRetry
	}
	if opts.AllowedTools == nil && w.Config.AllowedTools != nil {
		opts.AllowedTools = w.Config.AllowedTools
	}
	if opts.AllowedMCPServers == nil && w.Config.AllowedMCPServers != nil {
		opts.AllowedMCPServers = w.Config.AllowedMCPServers
	}
}

// runtime resolves the entry named entry and builds its runtime from
// opts after ApplyConfig.
func (w *Workflow) runtime(entry string, opts eval.Options) (any, *eval.Runtime, error) {
	v, err := w.Entry(entry)
	if err != nil {
		return nil, nil, err
	}
	w.ApplyConfig(&opts)
	rt, err := eval.New(opts)
	if err != nil {
		return nil, nil, err
	}
	return v, rt, nil
}

// Evaluate resolves the entry named entry with a runtime built from opts
// after ApplyConfig.
func (w *Workflow) Evaluate(ctx context.Context, entry string, opts eval.Options, eo ...eval.EvaluateOptions) (string, error) {
	v, rt, err := w.runtime(entry, opts)
	if err != nil {
		return "", err
	}
	if len(eo) > 0 && eo[0].Journal != nil {
		eo = append([]eval.EvaluateOptions(nil), eo...)
		if eo[0].Reads == nil {
			eo[0].Reads = w.Reads()
		}
		if eo[0].SourceRoot == "" {
			eo[0].SourceRoot = w.SourceRoot()
		}
	}
	return rt.Evaluate(ctx, v, eo...)
}

// Reads returns the env() values the workflow read while it loaded, as
// digests: a journaled evaluation records them, and a resumed one fails
// with a divergence before anything runs when one changed.
// (Workflow.Evaluate with a Journal and Workflow.Resume pass them
// themselves; env() in component code is recorded as it runs.)
func (w *Workflow) Reads() []eval.RecordedRead {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]eval.RecordedRead(nil), w.env.reads...)
}

// Secrets returns the values that must not be written where the
// workflow's results go (a journal's recorded error, a printed error):
// every value env() returned so far, while the workflow loaded and in
// component code of its evaluations, and every argument given to a
// parameter marked Secret in the catalog (the api_key of an ACP
// profile). Defaults and empty values are left out. The values are
// distinct, longest first (then in byte order), ready for redaction
// (the CLI replaces those of 4 bytes or more with "[redacted]"). An
// evaluation still running may add to them. It is safe for concurrent
// use.
func (w *Workflow) Secrets() []string {
	w.env.mu.Lock()
	out := make([]string, 0, len(w.env.secrets))
	for v := range w.env.secrets {
		out = append(out, v)
	}
	w.env.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// addSecret records v for Workflow.Secrets.
func (e *env) addSecret(v string) {
	if v == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.secrets == nil {
		e.secrets = map[string]bool{}
	}
	e.secrets[v] = true
}

// Resume evaluates entry ("" for main) again against the run recorded in
// ro.Journal (see eval.Runtime.Resume), with the configuration applied
// as Evaluate does and the workflow's load-time reads checked.
func (w *Workflow) Resume(ctx context.Context, entry string, opts eval.Options, ro eval.ResumeOptions) (string, error) {
	v, rt, err := w.runtime(entry, opts)
	if err != nil {
		return "", err
	}
	if ro.Reads == nil {
		ro.Reads = w.Reads()
	}
	if ro.SourceRoot == "" {
		ro.SourceRoot = w.SourceRoot()
	}
	return rt.Resume(ctx, v, ro)
}

// SourceRoot returns the directory of the workflow's entry file: in a
// journaled evaluation effect identities name files relative to it (see
// eval.EvaluateOptions.SourceRoot). A workflow loaded from an io/fs
// (LoadOptions.FS) has none.
func (w *Workflow) SourceRoot() string {
	if w.env.opts.FS != nil {
		return ""
	}
	abs, err := filepath.Abs(w.File)
	if err != nil {
		return ""
	}
	return filepath.Dir(abs)
}

// Files returns the workflow's files: the entry file, then the modules
// it loaded (not @std ones), sorted. It is safe for concurrent use.
func (w *Workflow) Files() []string {
	w.env.mu.Lock()
	var mods []string
	for k := range w.env.modules {
		if !strings.HasPrefix(k, "@") {
			mods = append(mods, k)
		}
	}
	w.env.mu.Unlock()
	sort.Strings(mods)
	return append([]string{w.File}, mods...)
}

// SourceDigest returns the hex SHA-256 of the workflow's sources: the
// entry file and every module it loaded (paths and contents, read again
// now), so a journaled run can tell whether the program changed since it
// was recorded. A workflow given as Source or FS digests what it can
// read from disk.
func (w *Workflow) SourceDigest() string {
	w.env.mu.Lock()
	files := make([]string, 0, len(w.env.modules)+1)
	for k := range w.env.modules {
		files = append(files, k)
	}
	w.env.mu.Unlock()
	entry := w.File
	if abs, err := filepath.Abs(w.File); err == nil && w.env.opts.FS == nil {
		entry = abs
	}
	sort.Strings(files)
	h := sha256.New()
	var src []byte
	if w.env.opts.Source != nil {
		src = w.env.opts.Source
	} else if w.env.opts.FS == nil {
		src, _ = ReadSource(entry)
	}
	fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(entry), len(src))
	h.Write(src)
	root := filepath.Dir(entry)
	for _, f := range files {
		var b []byte
		if w.env.opts.FS != nil {
			b, _ = fs.ReadFile(w.env.opts.FS, f)
		} else {
			b, _ = ReadSource(f)
		}
		name := f
		if rel, err := filepath.Rel(root, f); err == nil {
			name = filepath.ToSlash(rel)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// envDigest is the recorded digest of an env() value, never the value:
// HMAC-SHA256 under key (LoadOptions.EnvDigestKey) truncated to
// eval.Fingerprint's length and encoding, or eval.Fingerprint with no
// key.
func envDigest(key []byte, v string, set bool) string {
	marker := "=" + v
	if !set {
		marker = "\x00unset"
	}
	if key == nil {
		return eval.Fingerprint(marker)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(marker))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:fingerprintBytes])
}

// fingerprintBytes is how much of a SHA-256 eval.Fingerprint keeps.
const fingerprintBytes = 9

// Run loads the workflow at path and evaluates its entry ("" for main).
func Run(ctx context.Context, path, entry string, lo LoadOptions, opts eval.Options) (string, error) {
	w, err := LoadFile(path, lo)
	if err != nil {
		return "", err
	}
	return w.Evaluate(ctx, entry, opts)
}

// predeclared holds every core builtin, json and struct. Builtins keep
// their state in thread locals, so one frozen dictionary serves every
// workflow.
var predeclared = sync.OnceValue(func() starlark.StringDict {
	d := starlark.StringDict{
		"json":   json.Module,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
		"schema": schemaModule(),
	}
	for _, b := range coreCatalog() {
		if !strings.Contains(b.Name, ".") {
			d[b.Name] = b.value()
		}
	}
	d.Freeze()
	return d
})

// predeclaredWith is predeclared plus the builtins of exts; a name that
// is already taken is an error.
func predeclaredWith(exts []*Extension) (starlark.StringDict, error) {
	if len(exts) == 0 {
		return predeclared(), nil
	}
	base := predeclared()
	d := make(starlark.StringDict, len(base)+8)
	for k, v := range base {
		d[k] = v
	}
	for _, x := range exts {
		if x == nil {
			return nil, errors.New("a nil extension was given")
		}
		for _, b := range x.Builtins {
			if _, taken := d[b.Name]; taken {
				return nil, fmt.Errorf("extension %q: builtin %q is already predeclared", x.Name, b.Name)
			}
			if b.Impl == nil && b.raw == nil {
				return nil, fmt.Errorf("extension %q: builtin %q has no Impl", x.Name, b.Name)
			}
			d[b.Name] = b.value()
		}
	}
	d.Freeze()
	return d, nil
}

// Predeclared returns the names predeclared in every workflow file loaded
// with exts, sorted.
func Predeclared(exts ...*Extension) []string {
	d, err := predeclaredWith(exts)
	if err != nil {
		d = predeclared()
	}
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultHost returns the host runtime that workflows use for script()
// outside any sandbox(): the local sandbox provider (trusted execution on
// this machine, in process groups, with bounded output).
func DefaultHost() eval.SandboxProvider {
	p, err := local.New(local.Options{})
	if err != nil {
		// Not a Unix host: host scripts then fail with the provider's
		// reason when they run.
		return unavailableHost{err}
	}
	return p
}

// unavailableHost is the host of a machine without a local runtime.
type unavailableHost struct{ err error }

func (h unavailableHost) Name() string { return "host" }

func (h unavailableHost) Acquire(context.Context, *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	return nil, h.err
}

// SurfaceLimit converts a limit written in the Starlark and CLI convention
// (a non-negative integer, 0 disables the limit) into an eval.Limits field
// value, where 0 means the default and eval.Unlimited disables.
func SurfaceLimit(n int) int {
	if n == 0 {
		return eval.Unlimited
	}
	return n
}

// abs resolves p, a path given to a provider factory, from
// LoadOptions.Dir (else the working directory).
func (e *env) abs(p string) (string, error) {
	if p == "" || filepath.IsAbs(p) {
		return p, nil
	}
	if e != nil && e.opts.Dir != "" {
		return filepath.Join(e.opts.Dir, p), nil
	}
	return filepath.Abs(p)
}
