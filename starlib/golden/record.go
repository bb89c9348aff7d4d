package golden

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
	wslocal "github.com/aml-go/aml/providers/workspace/local"
	"github.com/aml-go/aml/starlib"
)

// Header is the first line of every golden file.
const Header = "# aml test golden: result, print output, agent requests (sorted by source position, then prompt) and error; rewrite with -update\n"

// Directives are the settings a test file's leading comment block holds.
type Directives struct {
	// Env holds the "# env: KEY=VALUE" values; env() sees nothing else.
	Env map[string]string
	// NoDefaultAgent is "# test: no-default-agent": agents without a
	// provider get no deterministic default and fail.
	NoDefaultAgent bool
	// LocalProviders is "# test: local-providers": local_sandbox() and
	// local_workspace() are kept instead of being replaced by twins, so
	// that sandboxed commands run on this machine (in a temporary
	// materialization, or in the workspace's directory) as under aml run.
	LocalProviders bool
	// Cassette is "# cassette: PATH": a journaled run (see package
	// journal) whose recorded agent results and answers are served
	// instead of deterministic twins. PATH is relative to the test file.
	Cassette string
}

// ParseDirectives reads the directives of the leading comment block of
// src: the lines before the first one that is neither blank nor a comment.
// Comment lines that are not directives are ignored; a malformed env or an
// unknown test directive is an error.
func ParseDirectives(src []byte) (Directives, error) {
	d := Directives{Env: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, len(src)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if rest, ok := strings.CutPrefix(body, "env:"); ok {
			k, v, ok := strings.Cut(rest, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return Directives{}, fmt.Errorf("malformed directive %q: want # env: KEY=VALUE", line)
			}
			d.Env[k] = strings.TrimSpace(v)
			continue
		}
		if rest, ok := strings.CutPrefix(body, "cassette:"); ok {
			if d.Cassette = strings.TrimSpace(rest); d.Cassette == "" {
				return Directives{}, fmt.Errorf("malformed directive %q: want # cassette: PATH (a journal directory, or one run's directory in it)", line)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(body, "test:"); ok {
			switch strings.TrimSpace(rest) {
			case "no-default-agent":
				d.NoDefaultAgent = true
			case "local-providers":
				d.LocalProviders = true
			default:
				return Directives{}, fmt.Errorf("unknown directive %q: the test directives are # test: no-default-agent and # test: local-providers", line)
			}
		}
	}
	return d, sc.Err()
}

// Record loads the workflow file, evaluates its main in test mode (see the
// package documentation) and returns its golden record. The error reports
// a file that cannot be read or has a malformed directive; a workflow that
// fails to load or evaluate is recorded, not returned. exts are the
// extensions the workflow is loaded with (starlib.LoadOptions.Extensions).
func Record(ctx context.Context, file string, exts ...*starlib.Extension) ([]byte, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	src, err := starlib.ReadSource(abs)
	if err != nil {
		return nil, err
	}
	d, err := ParseDirectives(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(abs), err)
	}
	dir := filepath.Dir(abs)
	h := &harness{local: d.LocalProviders}
	lo := starlib.LoadOptions{
		// Relative provider paths resolve from the test file's directory,
		// as its scripts run there.
		Dir:        dir,
		Source:     src,
		Extensions: exts,
		Env: func(name string) (string, bool) {
			v, ok := d.Env[name]
			return v, ok
		},
		Print: h.print,
	}
	var result string
	w, err := starlib.LoadFile(abs, lo)
	if err == nil {
		opts := eval.Options{Cwd: dir, ProviderOverride: h.override, SandboxOverride: h.sandboxTwin, WorkspaceOverride: h.workspaceTwin,
			Trace: []eval.TraceSink{h}}
		w.ApplyConfig(&opts)
		if opts.AgentProvider == nil && !d.NoDefaultAgent {
			opts.AgentProvider, err = deterministic.New(deterministic.Options{})
		}
		if err == nil && d.Cassette != "" {
			var c *cassette
			if c, err = loadCassette(filepath.Join(dir, d.Cassette)); err == nil {
				result, err = w.Evaluate(ctx, "main", opts, eval.EvaluateOptions{Journal: c, Cassette: true})
			} else {
				return nil, fmt.Errorf("%s: %w", filepath.Base(abs), err)
			}
		} else if err == nil {
			result, err = w.Evaluate(ctx, "main", opts)
		}
	}
	return h.render(dir, result, err), nil
}

// harness is the state of one recorded run.
type harness struct {
	// local keeps local_sandbox() and local_workspace() providers.
	local  bool
	mu     sync.Mutex
	prints []string
	calls  []*call
	// effects are the scripts run and files written, from the trace.
	effects []effect
	open    map[string]*effect
}

// effect is one script run or file write.
type effect struct {
	source string
	text   string
}

// CaptureContent implements eval.ContentCapturer: the harness records
// script command lines and file contents.
func (h *harness) CaptureContent() bool { return true }

// HandleTrace implements eval.TraceSink: it records every script and
// file() write with its outcome.
func (h *harness) HandleTrace(e eval.Event) error {
	if e.Kind != "script" && e.Kind != "file" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open == nil {
		h.open = map[string]*effect{}
	}
	switch e.Type {
	case eval.SpanStart:
		var b strings.Builder
		src, _ := e.Attributes["aml.source"].(string)
		if e.Kind == "script" {
			env, _ := e.Attributes["environment"].(string)
			cmd, _ := e.Attributes["command"].(string)
			fmt.Fprintf(&b, "%s script (%s)\n", src, env)
			writeField(&b, 1, "command", cmd)
		} else {
			fmt.Fprintf(&b, "%s file %s\n", src, e.Name)
			content, _ := e.Attributes["content"].(string)
			writeField(&b, 1, "content", content)
		}
		h.open[e.SpanID] = &effect{source: src, text: b.String()}
	case eval.SpanEnd:
		ef := h.open[e.SpanID]
		if ef == nil {
			return nil
		}
		delete(h.open, e.SpanID)
		var b strings.Builder
		b.WriteString(ef.text)
		switch {
		case e.Status == eval.StatusError:
			msg, _ := e.Attributes["error.message"].(string)
			writeField(&b, 1, "error", msg)
		case e.Kind == "script":
			fmt.Fprintf(&b, "  exit_code: %v\n", e.Attributes["exitCode"])
		}
		ef.text = b.String()
		h.effects = append(h.effects, *ef)
	}
	return nil
}

// sandboxTwin replaces sandbox providers that are not deterministic by a
// deterministic twin of the same name, so that tests run no commands in
// real sandboxes.
func (h *harness) sandboxTwin(p eval.SandboxProvider) eval.SandboxProvider {
	if p == nil {
		return nil
	}
	if _, ok := p.(*deterministic.Sandbox); ok {
		return p
	}
	if _, ok := p.(*local.Provider); ok && h.local {
		return p
	}
	twin, err := deterministic.NewSandbox(deterministic.SandboxOptions{Name: p.Name()})
	if err != nil {
		twin, _ = deterministic.NewSandbox(deterministic.SandboxOptions{})
	}
	return twin
}

// workspaceTwin replaces workspace providers that are not deterministic
// by a deterministic twin of the same name, so that tests touch no durable
// storage.
func (h *harness) workspaceTwin(p eval.WorkspaceProvider) eval.WorkspaceProvider {
	if p == nil {
		return nil
	}
	if _, ok := p.(*deterministic.Workspace); ok {
		return p
	}
	if ip, ok := p.(eval.InPlaceWorkspace); ok && ip.EditsInPlace() && p.Name() == wslocal.Name && h.local {
		return p
	}
	twin, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{Name: p.Name()})
	if err != nil {
		twin, _ = deterministic.NewWorkspace(deterministic.WorkspaceOptions{})
	}
	return twin
}

func (h *harness) print(msg string) {
	h.mu.Lock()
	h.prints = append(h.prints, msg)
	h.mu.Unlock()
}

// override is the run's eval.Options.ProviderOverride: deterministic
// providers are kept, others replaced by their twin, and every provider is
// wrapped so that its requests are recorded.
func (h *harness) override(p eval.AgentProvider) eval.AgentProvider {
	if p == nil {
		return nil
	}
	if _, ok := p.(*deterministic.Agent); !ok {
		p = newTwin(p)
	}
	return &recorder{inner: p, h: h}
}

// twin is the deterministic stand-in of a provider: it echoes the initial
// prompt under the original's name and reports the original's optional
// capabilities, so that the requests it receives are those the original
// would have received.
type twin struct {
	*deterministic.Agent
	orig         eval.AgentProvider
	nativeSkills bool
	objectInputs bool
}

func newTwin(p eval.AgentProvider) eval.AgentProvider {
	respond := twinRespond(p.Name())
	a, err := deterministic.New(deterministic.Options{Name: p.Name(), Respond: respond})
	if err != nil {
		// The name is not a valid deterministic provider name; the twin
		// keeps the default name.
		a, _ = deterministic.New(deterministic.Options{Respond: respond})
	}
	t := &twin{Agent: a, orig: p}
	if ns, ok := p.(eval.NativeSkills); ok {
		t.nativeSkills = ns.NativeSkillDiscovery()
	}
	if oi, ok := p.(eval.ObjectToolInputs); ok {
		t.objectInputs = oi.RequiresObjectToolInput()
	}
	return t
}

// twinRespond echoes the initial prompt, as a twin does; a structured
// result cannot be echoed, so for an agent with a schema it says what the
// test must supply.
func twinRespond(name string) deterministic.RespondFunc {
	echo := deterministic.Echo()
	return func(ctx context.Context, req *eval.AgentRequest, idx int) (*eval.AgentResponse, error) {
		if req.Output != nil {
			return nil, fmt.Errorf("in aml test, provider %q is replaced by a deterministic twin that echoes the prompt, so it cannot produce the structured result this agent asks for (schema=); supply one in the test: pass provider = deterministic_agent(respond = lambda req: {\"structured\": ...}) to this agent, or set it with configure(agent_provider = ...)", name)
		}
		return echo(ctx, req, idx)
	}
}

// supportsSandbox asks p's sandbox handshake about session s.
func supportsSandbox(p eval.AgentProvider, s *eval.SandboxSession) bool {
	sc, ok := p.(eval.SandboxCompatible)
	return ok && sc.SupportsSandbox(s)
}

// SupportsSandbox implements eval.SandboxCompatible with the original's
// answer.
func (t *twin) SupportsSandbox(s *eval.SandboxSession) bool { return supportsSandbox(t.orig, s) }

// NativeSkillDiscovery implements eval.NativeSkills.
func (t *twin) NativeSkillDiscovery() bool { return t.nativeSkills }

// RequiresObjectToolInput implements eval.ObjectToolInputs.
func (t *twin) RequiresObjectToolInput() bool { return t.objectInputs }

// recorder wraps the provider an agent runs with and records the request
// and the response. It reports the optional boolean capabilities of the
// provider it wraps (a capability it does not implement reads false, as
// the evaluator treats a missing one).
type recorder struct {
	inner eval.AgentProvider
	h     *harness
}

// call is one recorded provider call.
type call struct {
	source eval.Position
	prompt string
	text   string
}

// Name implements eval.AgentProvider.
func (r *recorder) Name() string { return r.inner.Name() }

// Run implements eval.AgentProvider.
func (r *recorder) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (resp *eval.AgentResponse, err error) {
	c := &call{prompt: req.Prompt}
	if exec != nil {
		c.source = exec.Source
	}
	var b strings.Builder
	writeRequest(&b, r.inner.Name(), c.source, req)
	r.h.mu.Lock()
	r.h.calls = append(r.h.calls, c)
	r.h.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(&b, "  panic: %v\n", p)
			r.finish(c, &b)
			panic(p)
		}
		writeResponse(&b, resp, err)
		r.finish(c, &b)
	}()
	return r.inner.Run(ctx, req, exec)
}

func (r *recorder) finish(c *call, b *strings.Builder) {
	r.h.mu.Lock()
	c.text = b.String()
	r.h.mu.Unlock()
}

// NativeSkillDiscovery implements eval.NativeSkills.
func (r *recorder) NativeSkillDiscovery() bool {
	ns, ok := r.inner.(eval.NativeSkills)
	return ok && ns.NativeSkillDiscovery()
}

// RequiresObjectToolInput implements eval.ObjectToolInputs.
func (r *recorder) RequiresObjectToolInput() bool {
	oi, ok := r.inner.(eval.ObjectToolInputs)
	return ok && oi.RequiresObjectToolInput()
}

// ReportsCost implements eval.CostReporter with the wrapped provider's
// answer.
func (r *recorder) ReportsCost() bool {
	cr, ok := r.inner.(eval.CostReporter)
	return ok && cr.ReportsCost()
}

// SupportsSandbox implements eval.SandboxCompatible with the wrapped
// provider's answer.
func (r *recorder) SupportsSandbox(s *eval.SandboxSession) bool { return supportsSandbox(r.inner, s) }

func writeRequest(b *strings.Builder, provider string, source eval.Position, req *eval.AgentRequest) {
	fmt.Fprintf(b, "%s provider=%s", source, provider)
	if req.Model != "" {
		fmt.Fprintf(b, " model=%s", req.Model)
	}
	if req.Name != "" {
		fmt.Fprintf(b, " name=%s", req.Name)
	}
	b.WriteByte('\n')
	writeField(b, 1, "prompt", req.Prompt)
	if req.System != "" {
		writeField(b, 1, "system", req.System)
	}
	for i, f := range req.FollowUps {
		writeField(b, 1, "follow_up["+strconv.Itoa(i+1)+"]", f)
	}
	if p := req.Permissions; p != eval.DefaultPermissions() {
		writeField(b, 1, "permissions", fmt.Sprintf("filesystem=%s network=%t shell=%t", p.Filesystem, p.Network, p.Shell))
	}
	for i, t := range req.Tools {
		writeField(b, 1, "tool["+strconv.Itoa(i+1)+"]", t.Name)
		if t.Description != "" {
			writeField(b, 2, "description", t.Description)
		}
		if t.InputSchema != nil {
			writeField(b, 2, "input_schema", jsonText(t.InputSchema))
		}
	}
	for i, m := range req.MCPServers {
		kind := "provider-native"
		if m.Server != nil {
			kind = m.Server.Transport.Type
		}
		writeField(b, 1, "mcp_server["+strconv.Itoa(i+1)+"]", m.Name+" ("+kind+")")
	}
	for i, s := range req.Skills {
		writeField(b, 1, "skill["+strconv.Itoa(i+1)+"]", s.Name)
		if s.Description != "" {
			writeField(b, 2, "description", s.Description)
		}
		if s.SkillFile != "" {
			writeField(b, 2, "file", s.SkillFile)
		}
	}
	if req.Output != nil {
		writeField(b, 1, "output_schema", jsonText(req.Output.JSONSchema))
	}
}

func writeResponse(b *strings.Builder, resp *eval.AgentResponse, err error) {
	switch {
	case err != nil:
		writeField(b, 1, "error", err.Error())
	case resp == nil:
		writeField(b, 1, "error", "provider returned no response")
	default:
		if resp.Text != "" || resp.Structured == nil {
			writeField(b, 1, "result", resp.Text)
		}
		if resp.Structured != nil {
			writeField(b, 1, "structured", jsonText(resp.Structured))
		}
		for i, m := range resp.Messages {
			writeField(b, 1, "message["+strconv.Itoa(i+1)+"]", m)
		}
		if resp.Spent != nil {
			if !resp.Spent.IsZero() {
				writeField(b, 1, "usage", usageText(*resp.Spent))
			}
		} else if u, err := eval.ParseUsage(resp.Usage); err != nil {
			writeField(b, 1, "usage", "(cannot be read: "+err.Error()+") "+resp.Usage)
		} else if !u.IsZero() {
			writeField(b, 1, "usage", usageText(u))
		}
	}
}

// usageText is a usage report as a golden records it: its non-zero
// fields, in a fixed order.
func usageText(u eval.Usage) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    int64
	}{{"input_tokens", u.InputTokens}, {"cached_input_tokens", u.CachedInputTokens}, {"output_tokens", u.OutputTokens},
		{"reasoning_tokens", u.ReasoningTokens}, {"model_calls", u.ModelCalls}} {
		if f.v != 0 {
			parts = append(parts, f.name+"="+strconv.FormatInt(f.v, 10))
		}
	}
	if u.CostUSD != 0 {
		parts = append(parts, "cost_usd="+strconv.FormatFloat(u.CostUSD, 'f', -1, 64))
	}
	return strings.Join(parts, " ")
}

// jsonText is v as canonical JSON, or a description of why it is not
// JSON data.
func jsonText(v any) string {
	s, err := eval.CanonicalJSON(v)
	if err != nil {
		return fmt.Sprintf("(not JSON data: %v) %v", err, v)
	}
	return s
}

// writeField writes "name: value" at the indent level for a plain one-line
// value, and otherwise "name:" followed by one "|"-prefixed line per text
// line, so that blank lines and surrounding whitespace stay visible.
func writeField(b *strings.Builder, level int, name, value string) {
	indent := strings.Repeat("  ", level)
	if value != "" && !strings.Contains(value, "\n") && strings.TrimSpace(value) == value && !strings.HasPrefix(value, "|") {
		fmt.Fprintf(b, "%s%s: %s\n", indent, name, value)
		return
	}
	fmt.Fprintf(b, "%s%s:\n", indent, name)
	writeLines(b, indent+"  |", value)
}

// writeLines writes every line of s (split at "\n") with prefix.
func writeLines(b *strings.Builder, prefix, s string) {
	for line := range strings.SplitSeq(s, "\n") {
		b.WriteString(prefix)
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

// render builds the golden record of a run.
func (h *harness) render(dir, result string, err error) []byte {
	staging := regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/aml-agent-[0-9]+`)
	strip := func(s string) string {
		s = staging.ReplaceAllString(s, "$$STAGING")
		s = strings.ReplaceAll(s, dir+string(filepath.Separator), "")
		return strings.ReplaceAll(s, dir, ".")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	b.WriteString(Header)
	if err == nil {
		b.WriteString(resultSection)
		writeLines(&b, "|", strip(result))
	}
	if len(h.prints) > 0 {
		b.WriteString("-- print --\n")
		for _, p := range h.prints {
			writeLines(&b, "", strip(p))
		}
	}
	if len(h.calls) > 0 {
		calls := slices.Clone(h.calls)
		slices.SortStableFunc(calls, func(x, y *call) int {
			return cmp.Or(
				strings.Compare(x.source.File, y.source.File),
				cmp.Compare(x.source.Line, y.source.Line),
				cmp.Compare(x.source.Col, y.source.Col),
				strings.Compare(x.prompt, y.prompt),
				strings.Compare(x.text, y.text),
			)
		})
		b.WriteString("-- agents --\n")
		for _, c := range calls {
			b.WriteString(strip(c.text))
		}
	}
	if len(h.effects) > 0 {
		effects := slices.Clone(h.effects)
		slices.SortStableFunc(effects, func(x, y effect) int {
			return cmp.Or(compareSource(x.source, y.source), strings.Compare(x.text, y.text))
		})
		b.WriteString("-- effects --\n")
		for _, ef := range effects {
			b.WriteString(strip(ef.text))
		}
	}
	if err != nil {
		b.WriteString(errorSection)
		writeLines(&b, "", strip(err.Error()))
	}
	return []byte(b.String())
}

// resultSection starts the result of a record: the first section of a
// run that succeeded, which a failed run's record lacks.
const resultSection = "-- result --\n"

// errorSection starts the error of a record: the last section of a run
// that failed.
const errorSection = "-- error --\n"

// compareSource orders "file:line:col" positions numerically.
func compareSource(a, b string) int {
	pa, pb := splitSource(a), splitSource(b)
	return cmp.Or(strings.Compare(pa.file, pb.file), cmp.Compare(pa.line, pb.line), cmp.Compare(pa.col, pb.col))
}

type sourcePos struct {
	file      string
	line, col int
}

func splitSource(s string) sourcePos {
	parts := strings.Split(s, ":")
	if len(parts) < 3 {
		return sourcePos{file: s}
	}
	line, _ := strconv.Atoi(parts[len(parts)-2])
	col, _ := strconv.Atoi(parts[len(parts)-1])
	return sourcePos{file: strings.Join(parts[:len(parts)-2], ":"), line: line, col: col}
}
