package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/log"
	"github.com/joho/godotenv"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
	"github.com/aml-go/aml/internal/liveview"
	"github.com/aml-go/aml/internal/redact"
	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/observe"
	"github.com/aml-go/aml/report"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
	"github.com/aml-go/aml/temporal/wire"
)

// cleanupDeadline bounds graceful cleanup after the first signal.
const cleanupDeadline = 10 * time.Second

// otlpShutdown bounds the final flush of the OTLP exporter.
const otlpShutdown = 5 * time.Second

// limitFlag is an int flag that remembers whether it was given.
type limitFlag struct {
	v   int
	set bool
}

// String implements flag.Value.
func (f *limitFlag) String() string { return strconv.Itoa(f.v) }

// Set implements flag.Value: a non-negative integer.
func (f *limitFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a non-negative integer, got %q", s)
	}
	if n < 0 {
		return fmt.Errorf("want a non-negative integer (0 disables the limit), got %d", n)
	}
	f.v, f.set = n, true
	return nil
}

// floatFlag is a non-negative number flag that remembers whether it was
// given.
type floatFlag struct {
	v   float64
	set bool
}

// String implements flag.Value.
func (f *floatFlag) String() string { return strconv.FormatFloat(f.v, 'f', -1, 64) }

// Set implements flag.Value: a non-negative finite number.
func (f *floatFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Errorf("want a non-negative number (0: no budget), got %q", s)
	}
	f.v, f.set = v, true
	return nil
}

// durationFlag is a non-negative duration flag, in seconds or with a unit
// ("90", "1.5", "10m"), that remembers whether it was given.
type durationFlag struct {
	v   time.Duration
	set bool
}

// String implements flag.Value.
func (f *durationFlag) String() string { return f.v.String() }

// Set implements flag.Value.
func (f *durationFlag) Set(s string) error {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("want a non-negative number of seconds or a duration such as 10m, got %q", s)
		}
		f.v, f.set = time.Duration(v*float64(time.Second)), true
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("want a non-negative number of seconds or a duration such as 10m, got %q", s)
	}
	f.v, f.set = v, true
	return nil
}

type runFlags struct {
	entry          string
	envFile        string
	trace          bool
	traceFile      string
	otlpEndpoint   string
	captureContent bool
	json           bool
	quiet          bool
	maxAgentCalls  limitFlag
	maxConcurrent  limitFlag
	maxDepth       limitFlag
	maxTurns       limitFlag
	maxSteps       limitFlag
	maxPromptBytes limitFlag
	// The spend flags override configure(budget=)'s keys; prices is
	// --prices FILE.
	maxTokens, maxModelCalls, maxToolCalls limitFlag
	maxCost                                floatFlag
	maxWall                                durationFlag
	prices                                 string
	// journal is --journal DIR: the run is durable (see journal.go).
	journal string
	// report is --report FILE: the run report is written there at the
	// end (see report.go).
	report string
	// temporal names the Temporal service of aml run --temporal (see
	// temporal.go); detach is --detach.
	temporal temporalFlags
	detach   bool
}

const runUsage = "usage: aml run FILE [flags]\n\nEvaluates FILE's entry (main, or --entry NAME) and prints the result on stdout.\n\nFlags:\n"

func newRunFlagSet(f *runFlags, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("run", runUsage, stderr)
	fs.StringVar(&f.entry, "entry", "", "global to evaluate (default main)")
	fs.StringVar(&f.entry, "e", "", "shorthand for --entry")
	fs.StringVar(&f.envFile, "runtime-env-file", "", "environment file applied after the .env files (overrides everything)")
	f.outputFlags(fs)
	fs.Var(&f.maxAgentCalls, "max-agent-calls", "limit of agent sessions (default 32; 0 disables)")
	fs.Var(&f.maxConcurrent, "max-concurrent-agents", "limit of concurrent agent calls (default 4; 0 disables)")
	fs.Var(&f.maxDepth, "max-depth", "limit of nested depth (default 16; 0 disables)")
	fs.Var(&f.maxTurns, "max-turns-per-agent", "limit of turns per agent (default 16; 0 disables)")
	fs.Var(&f.maxSteps, "max-steps", "limit of Starlark computation steps of the evaluation (default 0: none)")
	fs.Var(&f.maxPromptBytes, "max-prompt-bytes", "limit of the bytes one agent session sends: system text, prompt and follow-ups (default 4194304; 0: none)")
	f.spendFlags(fs)
	fs.StringVar(&f.journal, "journal", "", "record the run in this journal directory, so that aml resume can continue it after a crash or a question")
	fs.StringVar(&f.report, "report", "", "write the run report (one self-contained HTML page: the tree, a timeline, errors, totals) to this file when the run ends")
	f.temporal.register(fs, "run on the Temporal service at HOST:PORT, on the aml worker processes of its task queue")
	fs.BoolVar(&f.detach, "detach", false, "with --temporal: print the run id (alone, on stdout) and return without waiting")
	return fs
}

// spendFlags adds the flags of the run's budget and prices.
func (f *runFlags) spendFlags(fs *flag.FlagSet) {
	fs.Var(&f.maxTokens, "max-tokens", "budget of input and output tokens for the run (overrides configure(budget=)'s tokens; 0: none)")
	fs.Var(&f.maxCost, "max-cost", "budget of the run's cost in US dollars (overrides configure(budget=)'s cost_usd; 0: none)")
	fs.Var(&f.maxModelCalls, "max-model-calls", "budget of model calls for the run (0: none)")
	fs.Var(&f.maxToolCalls, "max-tool-calls", "budget of tool calls for the run (0: none)")
	fs.Var(&f.maxWall, "max-wall", "budget of the run's elapsed time: seconds or a duration such as 10m (0: none)")
	fs.StringVar(&f.prices, "prices", "", "JSON file of model prices, {\"MODEL\": {\"input\": USD, \"output\": USD, \"cached_input\": USD}} per million tokens (overrides configure(prices=))")
}

// outputFlags adds the flags of what a run prints and traces, shared by
// aml run and aml resume.
func (f *runFlags) outputFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.trace, "trace", false, "write metadata-only trace events to stderr")
	fs.StringVar(&f.traceFile, "trace-file", "", "also write trace events as JSON lines to this file")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to this collector (default: OTEL_EXPORTER_OTLP_ENDPOINT when set)")
	fs.BoolVar(&f.captureContent, "capture-content", false, "include sensitive content (prompts, results, errors) in traces; implies --trace")
	fs.BoolVar(&f.json, "json", false, "print a JSON envelope {runId, durationMs, success, result, error}")
	fs.BoolVar(&f.quiet, "quiet", false, "do not log run lifecycle lines to stderr")
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	var f runFlags
	fs := newRunFlagSet(&f, stderr)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "aml run: want exactly one workflow file, got %d arguments\n", len(pos))
		fs.Usage()
		return exitUsage
	}
	if f.temporal.address != "" {
		if f.journal != "" {
			fmt.Fprintln(stderr, "aml run: --temporal does not take --journal: Temporal keeps the run's history, and its workers its journal")
			return exitUsage
		}
		if f.detach && (f.report != "" || f.trace || f.traceFile != "" || f.captureContent || f.otlpEndpoint != "") {
			fmt.Fprintln(stderr, "aml run: --detach does not take --report or the trace flags: a detached submitter does not follow the run")
			return exitUsage
		}
		return runTemporal(&f, &f.temporal, f.detach, pos[0], stdout, stderr)
	}
	if f.detach {
		fmt.Fprintln(stderr, "aml run: --detach needs --temporal")
		return exitUsage
	}
	r := newRunner(&f, pos[0], stdout, stderr)
	defer r.close()
	r.reportLeftovers()
	// Signals are caught from here on: a SIGINT during the workflow's
	// top-level code (or the run) cancels it and exits 130/143 through the
	// handler instead of killing the process.
	defer listen(r.sigs)()
	if f.journal != "" {
		// Only a journaled run records digests of env() values, and
		// needs the key (made here on first use).
		key, _, _, err := journalKey()
		if err != nil {
			r.logger.Error(fmt.Sprintf("--journal: %v", err))
			return exitUsage
		}
		r.envKey = key
	}
	wf, entry, rt, code := r.prepare()
	if rt == nil {
		return code
	}
	if f.journal != "" {
		return r.runJournaled(rt, wf, entry)
	}
	runID := eval.NewRunID()
	return r.run(runID, func(ctx context.Context) (string, error) {
		return rt.Evaluate(ctx, entry, eval.EvaluateOptions{RunID: runID})
	}, redactOutcome(wf, nil))
}

// redactOutcome returns the hook that replaces the workflow's secrets
// (Workflow.Secrets: the values env() returned and the credentials
// given to providers) in a run's error by "[redacted]", with the rule
// ACP agents' errors follow, before anything records or prints it; then
// it calls next, when not nil. A failing script's stderr, which the
// error quotes, thus reaches neither the journal nor the terminal with
// a secret in it.
func redactOutcome(wf *starlib.Workflow, next func(outcome) outcome) func(outcome) outcome {
	return func(res outcome) outcome {
		if res.err != nil {
			res.err = redact.New(wf.Secrets()...).Error(res.err)
		}
		if next != nil {
			res = next(res)
		}
		return res
	}
}

// prepare applies the .env files, loads the workflow, resolves its entry
// and builds the runtime, for aml run and aml resume. A nil runtime means
// the command ends with the returned exit code (the failure was
// reported).
func (r *runner) prepare() (*starlib.Workflow, any, *eval.Runtime, int) {
	f := r.f
	if err := loadEnvFiles(r.file, f.envFile); err != nil {
		r.logger.Error(err.Error())
		return nil, nil, nil, exitUsage
	}
	if err := preflight(r.file, f.entry); err != nil {
		return nil, nil, nil, reportLoadError(r.stderr, r.stdout, f.json, err)
	}
	printer := r.logger.WithPrefix("print")
	wf, err := r.load(starlib.LoadOptions{Print: func(msg string) { printer.Print(msg) }, Extensions: extensions(), EnvDigestKey: r.envKey})
	if code, stopped := r.stoppedDuringLoad(); stopped {
		return nil, nil, nil, code
	}
	if err != nil {
		return nil, nil, nil, reportLoadError(r.stderr, r.stdout, f.json, err)
	}
	entry, err := wf.Entry(f.entry)
	if err != nil {
		return nil, nil, nil, reportLoadError(r.stderr, r.stdout, f.json, err)
	}
	opts, err := r.options(wf)
	if err != nil {
		r.logger.Error(err.Error())
		return nil, nil, nil, exitUsage
	}
	if err := checkPrices(r.file, opts); err != nil {
		return nil, nil, nil, reportLoadError(r.stderr, r.stdout, f.json, err)
	}
	if l, rr := wf.Config.RateLimits, wf.Config.RateLimitRetry; l != nil || rr != nil {
		// The rate limits of the model gateway's upstreams, and how it
		// retries them.
		g, err := gateway.Shared()
		if err == nil && l != nil {
			err = g.SetLimits(l)
		}
		if err == nil && rr != nil {
			err = g.SetRetry(*rr)
		}
		if err != nil {
			r.logger.Error(err.Error())
			return nil, nil, nil, exitUsage
		}
	}
	rt, err := eval.New(opts)
	if err != nil {
		r.logger.Error(err.Error())
		return nil, nil, nil, exitUsage
	}
	return wf, entry, rt, exitOK
}

// checkPrices refuses, before anything runs, a run with a cost budget
// whose file names a model that has no price: a literal model= of an
// agent() that names no provider (when the default provider reports no
// cost of its own) or of an agent provider factory. The evaluator refuses
// the models the source does not show when their sessions would start.
func checkPrices(file string, opts eval.Options) error {
	if opts.Budget == nil || opts.Budget.CostUSD <= 0 {
		return nil
	}
	src, err := starlib.ReadSource(file)
	if err != nil {
		return nil
	}
	f, err := analysis.Parse(file, src)
	if err != nil {
		return nil
	}
	defaultReports := false
	if cr, ok := opts.AgentProvider.(eval.CostReporter); ok {
		defaultReports = cr.ReportsCost()
	}
	var errs []error
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		fn, ok := call.Fn.(*syntax.Ident)
		if !ok || (fn.Name != "agent" && (!strings.HasSuffix(fn.Name, "_agent") || fn.Name == "deterministic_agent")) {
			return true
		}
		var model *syntax.Literal
		provider := false
		for _, arg := range call.Args {
			be, ok := arg.(*syntax.BinaryExpr)
			if !ok || be.Op != syntax.EQ {
				continue
			}
			switch be.X.(*syntax.Ident).Name {
			case "model":
				model, _ = be.Y.(*syntax.Literal)
			case "provider":
				provider = true
			}
		}
		if model == nil || model.Token != syntax.STRING || (fn.Name == "agent" && (provider || defaultReports)) {
			return true
		}
		name, _ := model.Value.(string)
		if _, ok := eval.PriceOf(opts.Prices, name); ok || name == "" {
			return true
		}
		errs = append(errs, &checkError{pos: fmt.Sprintf("%s:%d:%d", file, model.TokenPos.Line, model.TokenPos.Col),
			msg: fmt.Sprintf("model %q has no price, and the run has a cost_usd budget: add it to configure(prices = {%q: {\"input\": ..., \"output\": ...}}) or --prices FILE (US dollars per million tokens)", name, name)})
		return true
	})
	if len(errs) == 0 {
		return nil
	}
	return &starlib.LoadError{File: file, Err: errors.Join(errs...)}
}

// preflight runs aml check's analysis (without the lint) over file
// before anything of it runs: a mistake the source shows (a syntax
// error, an undefined name, an unknown keyword, a literal a builtin
// refuses, a node out of place) fails the run as a load error, with the
// words and the position aml check reports, even when it sits in code
// the run would reach only after its agents ran. The analysis reports
// nothing a run would not (its tests hold it to the runtime over every
// golden workflow). A file it cannot read is left to the load, which
// reports that; a tree that exceeds a limit configure() sets is left to
// the run, since a flag may change the limit.
func preflight(file, entry string) error {
	src, err := starlib.ReadSource(file)
	if err != nil {
		return nil
	}
	var errs []error
	for _, d := range analysis.Analyze(file, src, &analysis.Options{Extensions: extensions(), Entry: entry, NoLint: true}).Diagnostics {
		if d.Severity != analysis.Error || d.Limit != "" {
			continue // limits are the run's: flags may override them
		}
		at := d.At()
		errs = append(errs, &checkError{pos: fmt.Sprintf("%s:%d:%d", d.File, at.Line, at.Col), msg: d.Message})
	}
	if len(errs) == 0 {
		return nil
	}
	return &starlib.LoadError{File: file, Err: errors.Join(errs...)}
}

// checkError is one error the analysis found, as a run reports it.
type checkError struct{ pos, msg string }

func (e *checkError) Error() string { return e.pos + ": " + e.msg }

// runner is one aml run: its flags, outputs, logger, live view and the
// resources (trace file, OTLP exporter) to close when it ends.
type runner struct {
	f              *runFlags
	file           string
	stdout, stderr io.Writer
	logger         *log.Logger
	lv             *liveview.View
	closers        []func()
	// sigs receives SIGINT and SIGTERM from before the load on; loadSig is
	// a signal that arrived during the load.
	sigs    chan arrival
	loadSig os.Signal
	// envKey keys the digests of env() values (journaled runs and
	// resumes; see journalKey), nil for none.
	envKey []byte
	// spent is what the run spent (eval.FinishEvent.Usage), set before
	// its outcome is reported.
	spent eval.Usage
}

// load loads the workflow file under a context that the first signal
// cancels, so that endless top-level code stops.
func (r *runner) load(lo starlib.LoadOptions) (*starlib.Workflow, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	lo.Context = ctx
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case a := <-r.sigs:
			r.loadSig = a.sig
			cancel(fmt.Errorf("aml run interrupted by %s", signalName(a.sig)))
		case <-done:
		}
	}()
	wf, err := starlib.LoadFile(r.file, lo)
	close(done)
	<-watched
	return wf, err
}

// stoppedDuringLoad reports the exit code of a signal that arrived while
// the workflow loaded.
func (r *runner) stoppedDuringLoad() (int, bool) {
	if r.loadSig == nil {
		return 0, false
	}
	r.logger.Warnf("received %s while loading %s: stopped", signalName(r.loadSig), r.file)
	if r.f.json {
		writeEnvelope(r.stdout, "", 0, "", fmt.Errorf("aml run interrupted by %s", signalName(r.loadSig)), eval.Usage{})
	}
	if r.loadSig == syscall.SIGTERM {
		return exitSIGTERM, true
	}
	return exitSIGINT, true
}

// signalName names SIGINT and SIGTERM.
func signalName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// newRunner sets up the logger and, when stderr is a terminal that is not
// TERM=dumb (and no other stderr view was asked for), the live view of
// the running agents; log lines then go through it so that they never
// interleave with the redrawn block.
func newRunner(f *runFlags, file string, stdout, stderr io.Writer) *runner {
	r := &runner{f: f, file: file, stdout: stdout, stderr: stderr, sigs: make(chan arrival, 2)}
	r.logger = log.NewWithOptions(stderr, log.Options{Prefix: "aml"})
	if f.quiet {
		r.logger.SetLevel(log.ErrorLevel)
	}
	if fd, ok := stderr.(*os.File); ok && liveview.Want(fd, os.Getenv) && !f.trace && !f.captureContent && !f.quiet && !f.json {
		r.lv = liveview.New(stderr, liveview.Options{})
		r.logger.SetOutput(r.lv.Writer(stderr))
		r.logger.SetColorProfile(lipgloss.NewRenderer(fd).ColorProfile())
	}
	return r
}

// reportLeftovers makes the run report what killed aml processes left
// (leftovers) until it closes.
func (r *runner) reportLeftovers() {
	runLeftovers.start(r.logger)
	r.closers = append(r.closers, func() { runLeftovers.stop(r.logger) })
}

// close stops the live view and closes the run's resources, last first.
func (r *runner) close() {
	r.lv.Stop()
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// budget sets the run's budget (configure(budget=) with the spend flags
// given applied over its keys) and its prices (--prices over
// configure(prices=)).
func (f *runFlags) budget(wf *starlib.Workflow, opts *eval.Options) error {
	var b eval.Budget
	if wf.Config.Budget != nil {
		b = *wf.Config.Budget
	}
	if f.maxTokens.set {
		b.Tokens = int64(f.maxTokens.v)
	}
	if f.maxModelCalls.set {
		b.ModelCalls = int64(f.maxModelCalls.v)
	}
	if f.maxToolCalls.set {
		b.ToolCalls = int64(f.maxToolCalls.v)
	}
	if f.maxCost.set {
		b.CostUSD = f.maxCost.v
	}
	if f.maxWall.set {
		b.Wall = f.maxWall.v
	}
	// Always set, so that a flag's 0 removes what configure() set.
	opts.Budget = &b
	if f.prices != "" {
		p, err := readPrices(f.prices)
		if err != nil {
			return err
		}
		opts.Prices = p
	}
	return nil
}

// readPrices reads a --prices file: a JSON object of models, each
// {"input": USD, "output": USD, "cached_input": USD} per million tokens.
func readPrices(file string) (map[string]eval.Price, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("--prices %s: not a JSON object of models, each {\"input\": USD, \"output\": USD} per million tokens: %w", file, err)
	}
	out := make(map[string]eval.Price, len(raw))
	for model, fields := range raw {
		var p eval.Price
		for k, v := range fields {
			var x float64
			if err := json.Unmarshal(v, &x); err != nil {
				return nil, fmt.Errorf("--prices %s: %q %q must be a number of US dollars per million tokens, got %s", file, model, k, v)
			}
			switch k {
			case "input":
				p.Input = x
			case "output":
				p.Output = x
			case "cached_input":
				p.CachedInput = x
			default:
				msg := fmt.Sprintf("--prices %s: model %q has an unknown field %q", file, model, k)
				if s := starlib.NearestName(k, []string{"input", "output", "cached_input"}); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return nil, errors.New(msg + "; the fields are input, output and cached_input")
			}
		}
		for _, req := range []string{"input", "output"} {
			if _, ok := fields[req]; !ok {
				return nil, fmt.Errorf("--prices %s: model %q has no %q: give both input and output (US dollars per million tokens)", file, model, req)
			}
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("--prices %s: model %q: %w", file, model, err)
		}
		out[model] = p
	}
	return out, nil
}

// limits are the workflow's limits (configure()) with the limit flags
// given applied over them.
func (f *runFlags) limits(wf *starlib.Workflow) eval.Limits {
	limits := wf.Limits()
	for _, l := range []struct {
		flag *limitFlag
		dst  *int
	}{
		{&f.maxAgentCalls, &limits.MaxAgentCalls},
		{&f.maxConcurrent, &limits.MaxConcurrentAgents},
		{&f.maxDepth, &limits.MaxDepth},
		{&f.maxTurns, &limits.MaxTurnsPerAgent},
		{&f.maxSteps, &limits.MaxSteps},
		{&f.maxPromptBytes, &limits.MaxPromptBytes},
	} {
		if l.flag.set {
			*l.dst = starlib.SurfaceLimit(l.flag.v)
		}
	}
	return limits
}

// options builds the runtime options: configure() and then the flags for
// the limits, and the trace sinks the flags ask for.
func (r *runner) options(wf *starlib.Workflow) (eval.Options, error) {
	f := r.f
	opts := eval.Options{}
	limits := f.limits(wf)
	opts.Limits = &limits
	if err := f.budget(wf, &opts); err != nil {
		return opts, err
	}
	wf.ApplyConfig(&opts)
	opts.Ask = terminalAsk(r.stderr)
	opts.OnFinish = func(ev eval.FinishEvent) { r.spent = ev.Usage }

	if f.captureContent {
		f.trace = true
	}
	if f.trace {
		opts.Trace = append(opts.Trace, observe.NewConsoleTracer(r.stderr, f.captureContent))
	}
	if f.traceFile != "" {
		tf, err := os.Create(f.traceFile)
		if err != nil {
			return opts, fmt.Errorf("cannot create trace file: %w", err)
		}
		r.closers = append(r.closers, func() { tf.Close() })
		opts.Trace = append(opts.Trace, observe.NewJSONLinesTracer(tf, f.captureContent))
	}
	if f.report != "" {
		c := report.NewCollector(report.Options{Title: filepath.Base(r.file), CaptureContent: f.captureContent})
		opts.Trace = append(opts.Trace, c)
		path := f.report
		r.closers = append(r.closers, func() {
			if err := writeReport(c, path); err != nil {
				r.logger.Error(err.Error())
				return
			}
			if !f.quiet {
				r.logger.Info("wrote the run report", "file", path)
			}
		})
	}
	if f.otlpEndpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		if !linked.Linked() {
			return opts, errNotLinked("the OTLP exporter")
		}
		exp, err := linked.OTLP(context.Background(), services.OTLP{Endpoint: f.otlpEndpoint, CaptureContent: f.captureContent,
			OnError: func(err error) { r.logger.Warn("OTLP export failed", "err", err) }})
		if err != nil {
			return opts, fmt.Errorf("cannot set up the OTLP exporter: %w", err)
		}
		opts.Trace = append(opts.Trace, exp)
		r.closers = append(r.closers, func() {
			ctx, cancel := context.WithTimeout(context.Background(), otlpShutdown)
			defer cancel()
			_ = exp.Shutdown(ctx) // failures were reported through OnError
		})
	}
	var traceFailed atomic.Bool
	opts.OnTraceError = func(err error, ev eval.Event) {
		if traceFailed.CompareAndSwap(false, true) {
			r.logger.Warn("trace sink failed; the run continues", "err", err, "sequence", ev.Sequence)
		}
	}
	if r.lv != nil {
		opts.Trace = append(opts.Trace, r.lv)
	}
	return opts, nil
}

// outcome is how an evaluation ended.
type outcome struct {
	text string
	err  error
	dur  time.Duration
}

// run evaluates entry and reports the outcome. Signals are caught before
// the run starts, so that an early SIGINT cancels the run instead of
// killing the process; the first signal cancels it and waits up to
// cleanupDeadline for cleanup, a second one exits at once.
//
// ended, when non-nil, records the outcome in the run's journal before it
// is reported.
func (r *runner) run(runID string, evaluate func(ctx context.Context) (string, error), ended func(outcome) outcome) int {
	sigs := r.sigs

	r.logger.Infof("starting run %s for %s", runID, r.file)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan outcome, 1)
	started := time.Now()
	r.lv.Start()
	go func() {
		text, err := evaluate(ctx)
		res := outcome{text, err, time.Since(started)}
		if ended != nil {
			res = ended(res)
		}
		done <- res
	}()

	select {
	case res := <-done:
		return r.finish(runID, res)
	case first := <-sigs:
		sig := first.sig
		code, name := exitSIGINT, signalName(sig)
		if sig == syscall.SIGTERM {
			code = exitSIGTERM
		}
		r.logger.Warnf("received %s: cancelling run %s (up to %s for cleanup; send it again to exit now)", name, runID, cleanupDeadline)
		interrupted := &interruptError{signal: name}
		cancel(interrupted)
		deadline := time.After(cleanupDeadline)
	wait:
		for {
			select {
			case res := <-done:
				status := "ok"
				if res.err != nil {
					status = "error"
				}
				r.logger.Infof("run %s stopped after cleanup (%s)", runID, status)
				break wait
			case again := <-sigs:
				if repeatedSignal(first, again) {
					// One signal delivered twice (GNU timeout signals
					// the child and then its process group; so do some
					// supervisors): it counts once.
					continue
				}
				r.logger.Errorf("second signal: exiting without waiting for cleanup")
				break wait
			case <-deadline:
				r.logger.Errorf("cleanup did not finish within %s; exiting", cleanupDeadline)
				break wait
			}
		}
		r.lv.Stop()
		if r.f.json {
			writeEnvelope(r.stdout, runID, time.Since(started), "", interrupted, r.spent)
		}
		return code
	}
}

// finish reports a completed run: the result on stdout (or the --json
// envelope), the error on stderr.
func (r *runner) finish(runID string, res outcome) int {
	r.lv.Stop()
	status := "ok"
	var suspended *eval.SuspendedError
	switch {
	case errors.As(res.err, &suspended):
		status = "suspended"
	case res.err != nil:
		status = "error"
	}
	spend := ""
	if r.spent.Tokens() > 0 || r.spent.CostUSD > 0 {
		spend = ", " + r.spent.String()
	}
	r.logger.Infof("finished run %s (%s) in %s%s", runID, status, observe.FormatDuration(float64(res.dur.Microseconds())/1000), spend)
	var se *eval.SuspendedError
	if errors.As(res.err, &se) {
		r.reportSuspended(runID, res.dur, se)
		return exitSuspended
	}
	if r.f.json {
		writeEnvelope(r.stdout, runID, res.dur, res.text, res.err, r.spent)
	} else if res.err == nil {
		fmt.Fprint(r.stdout, res.text)
		if !strings.HasSuffix(res.text, "\n") {
			fmt.Fprintln(r.stdout)
		}
	}
	if res.err != nil {
		printError(r.stderr, res.err)
		return exitCodeOf(res.err)
	}
	return exitOK
}

// exitCodeOf is the exit code of a run that ended with err: a limit, a
// workflow that did not load, or any other failure.
func exitCodeOf(err error) int {
	switch errorCode(err) {
	case codeLimit, codeBudget:
		return exitLimit
	case codeLoad:
		return exitUsage
	}
	return exitFailure
}

func reportLoadError(stderr, stdout io.Writer, asJSON bool, err error) int {
	if asJSON {
		writeEnvelope(stdout, "", 0, "", err, eval.Usage{})
	}
	printError(stderr, err)
	return exitUsage
}

// printError writes the error once, then the Starlark traceback where it
// adds something: the calls that led to the failing line. A traceback of
// one frame at the position the message already names is left out, the
// "Error ..." line that repeats the message is never printed, and a deep
// recursion keeps its first and last frames with the count of those
// elided between.
func printError(w io.Writer, err error) {
	msg := err.Error()
	fmt.Fprintf(w, "aml: error: %s\n", msg)
	if frames := tracebackFrames(backtrace(err)); len(frames) > 1 || len(frames) == 1 && !strings.Contains(msg, strings.TrimSpace(strings.SplitN(frames[0], ": in ", 2)[0])) {
		fmt.Fprintln(w, "Traceback (most recent call last):")
		for _, f := range elideFrames(collapseFrames(frames), tracebackHead, tracebackTail) {
			fmt.Fprintln(w, f)
		}
	}
}

// The frames a long traceback keeps: its first (the entry's calls) and
// its last (where it failed).
const (
	tracebackHead = 10
	tracebackTail = 10
)

// tracebackFrames returns the frame lines of a Starlark backtrace
// ("  file:line:col: in name"), without its header and error lines.
func tracebackFrames(bt string) []string {
	var frames []string
	for _, line := range strings.Split(bt, "\n") {
		if strings.HasPrefix(line, "  ") && strings.Contains(line, ": in ") {
			frames = append(frames, line)
		}
	}
	return frames
}

// collapseFrames replaces a run of three or more identical frames (a
// function calling itself from one line) by the frame and a line that
// counts its repeats.
func collapseFrames(frames []string) []string {
	var out []string
	for i := 0; i < len(frames); {
		j := i + 1
		for j < len(frames) && frames[j] == frames[i] {
			j++
		}
		out = append(out, frames[i])
		switch n := j - i - 1; {
		case n == 1:
			out = append(out, frames[i])
		case n > 1:
			out = append(out, fmt.Sprintf("  [the frame above repeats %d more times]", n))
		}
		i = j
	}
	return out
}

// elideFrames keeps the first head and last tail frames of frames and
// replaces those between by one line that counts them.
func elideFrames(frames []string, head, tail int) []string {
	if len(frames) <= head+tail+1 {
		return frames
	}
	out := append([]string{}, frames[:head]...)
	out = append(out, fmt.Sprintf("  ... %d frames elided ...", len(frames)-head-tail))
	return append(out, frames[len(frames)-tail:]...)
}

// backtrace returns the first Starlark backtrace found in err's chain,
// searching wrapped and joined errors depth-first.
func backtrace(err error) string {
	if err == nil {
		return ""
	}
	if ee, ok := err.(*eval.EvaluationError); ok && ee.Backtrace != "" {
		return ee.Backtrace
	}
	switch u := err.(type) {
	case *wire.RunError:
		return u.Backtrace
	case *redact.Error:
		return u.Redact(backtrace(u.Unwrap()))
	case interface{ Unwrap() error }:
		return backtrace(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if bt := backtrace(e); bt != "" {
				return bt
			}
		}
	}
	return ""
}

func writeEnvelope(w io.Writer, runID string, dur time.Duration, text string, err error, spent eval.Usage, extra ...map[string]any) {
	env := map[string]any{
		"runId":      runID,
		"durationMs": math.Round(float64(dur.Microseconds())/100) / 10,
		"success":    err == nil,
		"result":     text,
		"usage":      usageJSON(spent),
		"cost_usd":   spent.CostUSD,
	}
	if err != nil {
		env["error"] = err.Error()
		env["code"] = errorCode(err)
		env["result"] = nil
		if env["code"] == codeSuspended {
			delete(env, "error") // waiting for answers is not an error
		}
	}
	for _, x := range extra {
		for k, v := range x {
			env[k] = v
		}
	}
	// Results are text for people and programs, not HTML: <, > and &
	// stay as they are.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(env)
}

// usageJSON is the envelope's usage object.
func usageJSON(u eval.Usage) map[string]int64 {
	return map[string]int64{
		"input_tokens":        u.InputTokens,
		"output_tokens":       u.OutputTokens,
		"cached_input_tokens": u.CachedInputTokens,
		"reasoning_tokens":    u.ReasoningTokens,
		"total_tokens":        u.Tokens(),
		"model_calls":         u.ModelCalls,
		"tool_calls":          u.ToolCalls,
	}
}

// loadEnvFiles applies .env, .env.local, .env.<mode> and .env.<mode>.local
// from the workflow's directory without overriding variables the process
// already has, then the explicit runtime env file, which overrides
// everything. Relative runtime env paths resolve from the working
// directory first, then from the workflow directory.
func loadEnvFiles(workflow, runtimeFile string) error {
	dir := filepath.Dir(workflow)
	mode := os.Getenv("AML_ENV")
	if mode == "" {
		mode = "development"
	}
	merged := map[string]string{}
	for _, name := range []string{".env", ".env.local", ".env." + mode, ".env." + mode + ".local"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		vals, err := godotenv.Read(p)
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		for k, v := range vals {
			merged[k] = v
		}
	}
	for k, v := range merged {
		if _, exists := os.LookupEnv(k); !exists {
			os.Setenv(k, v)
		}
	}
	if runtimeFile == "" {
		return nil
	}
	p := runtimeFile
	if _, err := os.Stat(p); err != nil && !filepath.IsAbs(p) {
		if alt := filepath.Join(dir, runtimeFile); fileExists(alt) {
			p = alt
		}
	}
	vals, err := godotenv.Read(p)
	if err != nil {
		return fmt.Errorf("--runtime-env-file: %w", err)
	}
	for k, v := range vals {
		os.Setenv(k, v)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// interruptError is the cause of a run cancelled by a signal; it is a
// cancellation (errors.Is context.Canceled).
type interruptError struct{ signal string }

func (e *interruptError) Error() string { return "aml run interrupted by " + e.signal }

// Is makes errors.Is(err, context.Canceled) hold.
func (e *interruptError) Is(target error) bool { return target == context.Canceled }
