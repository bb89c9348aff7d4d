package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/log"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal"
)

// defaultTaskQueue is the task queue of aml worker and aml run --temporal
// when --task-queue is not given.
const defaultTaskQueue = "aml"

// temporalFlags are the flags that name a Temporal service.
type temporalFlags struct {
	address   string
	namespace string
	taskQueue string
	// blobStore is --blob-store: where payloads too large for history
	// are kept (see temporal.BlobDriver).
	blobStore string
	// store is the opened blob store, once dial opened it.
	store persist.Storage
}

// register adds --temporal, --namespace and --task-queue to fs.
func (t *temporalFlags) register(fs *flag.FlagSet, addressHelp string) {
	fs.StringVar(&t.address, "temporal", "", addressHelp)
	fs.StringVar(&t.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE, else default)")
	fs.StringVar(&t.taskQueue, "task-queue", defaultTaskQueue, "Temporal task queue of the AML workers")
	fs.StringVar(&t.blobStore, "blob-store", "", "keep payloads above 256 KiB (bundles, prompts, results) in this directory or s3://BUCKET[/PREFIX], which every worker and client of the namespace must share (default: AML_TEMPORAL_BLOB_STORE)")
}

// addressFromEnv fills the address from TEMPORAL_ADDRESS when --temporal
// was not given, and reports whether there is one (saying what to do when
// there is not).
func (t *temporalFlags) addressFromEnv(cmd string, stderr io.Writer) bool {
	if t.address == "" {
		t.address = os.Getenv("TEMPORAL_ADDRESS")
	}
	if t.address == "" {
		fmt.Fprintf(stderr, "aml %s: no Temporal service: give --temporal HOST:PORT or set TEMPORAL_ADDRESS\n", cmd)
		return false
	}
	return true
}

// dial connects to the service, filling the namespace from
// TEMPORAL_NAMESPACE.
func (t *temporalFlags) dial() (client.Client, error) {
	if t.namespace == "" {
		t.namespace = os.Getenv("TEMPORAL_NAMESPACE")
	}
	if t.namespace == "" {
		t.namespace = "default"
	}
	opts := client.Options{HostPort: t.address, Namespace: t.namespace, Logger: sdkLogger{}}
	if t.blobStore == "" {
		t.blobStore = os.Getenv("AML_TEMPORAL_BLOB_STORE")
	}
	if t.blobStore != "" {
		st, err := (&storeFlags{}).openStore(t.blobStore)
		if err != nil {
			return nil, fmt.Errorf("--blob-store: %w", err)
		}
		t.store = st
		d, err := temporal.NewBlobDriver(st, "")
		if err != nil {
			return nil, fmt.Errorf("--blob-store: %w", err)
		}
		opts.ExternalStorage = d.ExternalStorage(0)
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w", t.address, t.namespace, err)
	}
	return c, nil
}

// sdkLogger drops the Temporal SDK's own logs: aml reports what matters.
type sdkLogger struct{}

func (sdkLogger) Debug(string, ...any) {}
func (sdkLogger) Info(string, ...any)  {}
func (sdkLogger) Warn(string, ...any)  {}
func (sdkLogger) Error(string, ...any) {}

const workerUsage = `usage: aml worker [--temporal HOST:PORT] [flags]

Runs AML workflows and their agent sessions from a Temporal task queue
until SIGINT or SIGTERM. Start any number of workers, on any machines: a
run submitted with aml run --temporal spreads its sessions over them.
Workers link the same providers as aml run, and make a workflow's
providers with their own environment (credentials never travel).

Flags:
`

func cmdWorker(args []string, stdout, stderr io.Writer) int {
	var t temporalFlags
	var maxAgents limitFlag
	var deadlock time.Duration
	fs := newFlagSet("worker", workerUsage, stderr)
	t.register(fs, "Temporal frontend address (default: TEMPORAL_ADDRESS)")
	fs.Var(&maxAgents, "max-concurrent-agents", "agent sessions this worker runs at once (default 4; 0: the SDK's default)")
	fs.DurationVar(&deadlock, "deadlock-timeout", 15*time.Second, "how long a task of workflow code may run without pausing before the worker fails it (below the runs' workflow task timeout, 20s)")
	sweepEvery := leaseSweepInterval
	fs.DurationVar(&sweepEvery, "sweep-interval", leaseSweepInterval, "how often the worker releases what runs that ended without releasing it (terminated runs) held here")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "aml worker: unexpected arguments %q\n", pos)
		fs.Usage()
		return exitUsage
	}
	if !t.addressFromEnv("worker", stderr) {
		return exitUsage
	}
	if !maxAgents.set {
		maxAgents.v = 4
	}
	if sweepEvery <= 0 {
		fmt.Fprintln(stderr, "aml worker: --sweep-interval must be positive")
		return exitUsage
	}
	logger := log.NewWithOptions(stderr, log.Options{Prefix: "aml"})
	c, err := t.dial()
	if err != nil {
		logger.Error(err.Error())
		return exitFailure
	}
	defer c.Close()
	host, _ := os.Hostname()
	w := worker.New(c, t.taskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: maxAgents.v,
		DeadlockDetectionTimeout:           deadlock,
		Identity:                           fmt.Sprintf("aml-worker@%s:%d", host, os.Getpid()),
		// sandbox() and workspace() scopes are held in sessions.
		EnableSessionWorker:               true,
		MaxConcurrentSessionExecutionSize: maxLeases,
	})
	// env() values in history are sealed with the journal key, which
	// every worker of a task queue must share (AML_JOURNAL_KEY_FILE).
	key, _, _, err := journalKey()
	if err != nil {
		logger.Error(fmt.Sprintf("the key that seals env() values: %v", err))
		return exitFailure
	}
	leases := temporal.Register(w, temporal.Options{Extensions: extensions(), EnvKey: key, Checkpoints: t.store, Client: c, ErrorCode: errorCode})
	if err := w.Start(); err != nil {
		logger.Error(fmt.Sprintf("cannot start the worker: %v", err))
		return exitFailure
	}
	logger.Infof("worker %d serving task queue %s of namespace %s on %s (%d concurrent agents)", os.Getpid(), t.taskQueue, t.namespace, t.address, maxAgents.v)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// What a terminated run held here is released by a sweep: a run that
	// was terminated (aml cancel after its grace) cannot release it.
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	var sig os.Signal
	for sig == nil {
		select {
		case sig = <-sigs:
		case <-sweep.C:
			sctx, cancel := context.WithTimeout(context.Background(), max(sweepEvery, 10*time.Second))
			released, err := leases.Sweep(sctx, c)
			cancel()
			for run, n := range released {
				logger.Infof("released %d lease(s) of run %s, which ended without releasing them", n, run)
			}
			if err != nil {
				logger.Warn(fmt.Sprintf("sweeping the leases of ended runs: %v", err))
			}
		}
	}
	logger.Infof("received %s: stopping (sessions in flight run again on another worker)", signalName(sig))
	w.Stop()
	// What runs held here is released: their scopes are acquired again
	// on another worker.
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if n := leases.Len(); n > 0 {
		logger.Infof("releasing %d sandbox and workspace lease(s) held here", n)
	}
	if err := leases.Release(rctx); err != nil {
		logger.Error(fmt.Sprintf("releasing the leases held here: %v", err))
		return exitFailure
	}
	return exitOK
}

// leaseSweepInterval is how often aml worker releases the leases of
// runs that ended without releasing them (temporal.Leases.Sweep).
const leaseSweepInterval = 20 * time.Second

// maxLeases bounds the sandbox and workspace scopes one worker holds at
// once (Temporal sessions).
const maxLeases = 1000

// runTemporal is aml run --temporal: the workflow file and its modules are
// packed and submitted as a run, whose result is printed as aml run
// prints it (or, with --detach, its id alone).
func runTemporal(f *runFlags, t *temporalFlags, detach bool, file string, stdout, stderr io.Writer) int {
	r := newRunner(f, file, stdout, stderr)
	defer r.close()
	// The workflow loads here first, so that its mistakes are reported
	// before anything is submitted, with the positions aml run gives.
	// What its top level prints is shown only then: otherwise the run
	// prints it again, in workflow code.
	if err := preflight(file, f.entry); err != nil {
		return reportLoadError(stderr, stdout, f.json, err)
	}
	var loadPrints []string
	wf, err := starlib.LoadFile(file, starlib.LoadOptions{Print: func(msg string) { loadPrints = append(loadPrints, msg) }, Extensions: extensions()})
	if err != nil {
		printer := r.logger.WithPrefix("print")
		for _, msg := range loadPrints {
			printer.Print(msg)
		}
		return reportLoadError(stderr, stdout, f.json, err)
	}
	if _, err := wf.Entry(f.entry); err != nil {
		return reportLoadError(stderr, stdout, f.json, err)
	}
	// The limit flags bound the run as they bound aml run; the trace
	// sinks of the flags follow it.
	limits := f.limits(wf)
	if f.captureContent {
		r.logger.Warn("--capture-content: a run on Temporal keeps prompts and output on its workers; the trace has metadata only")
	}
	opts, err := r.options(wf)
	if err != nil {
		r.logger.Error(err.Error())
		return exitFailure
	}
	if err := checkPrices(file, opts); err != nil {
		return reportLoadError(stderr, stdout, f.json, err)
	}
	b, err := temporal.Pack(file)
	if err != nil {
		return reportLoadError(stderr, stdout, f.json, err)
	}
	c, err := t.dial()
	if err != nil {
		r.logger.Error(err.Error())
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ac := temporal.NewClient(c, t.taskQueue)
	// The spend flags and --prices travel with the run, as the limits do.
	runID, err := ac.Start(ctx, b, temporal.StartOptions{Entry: f.entry, Limits: &limits, Budget: opts.Budget, Prices: opts.Prices, Memo: map[string]any{memoWorkflow: filepath.Base(file)}})
	if err != nil {
		r.logger.Error(fmt.Sprintf("cannot start the run on Temporal at %s: %v", t.address, err))
		return exitFailure
	}
	if detach {
		fmt.Fprintln(stdout, runID)
		return exitOK
	}
	r.logger.Infof("started run %s for %s on Temporal at %s (namespace %s, task queue %s)", runID, file, t.address, t.namespace, t.taskQueue)
	defer listen(r.sigs)()
	started := time.Now()
	// The run's trace events (metadata; content stays on the workers)
	// reach the live view and the trace sinks the flags ask for, and its
	// print() lines the log, as aml run's do.
	follow := &traceFollower{c: ac, runID: runID, sinks: opts.Trace}
	printer := r.logger.WithPrefix("print")
	prints := &printFollower{c: ac, runID: runID, print: func(msg string) { printer.Print(msg) }}
	r.lv.Start()
	done := make(chan outcome, 1)
	ended := make(chan struct{})
	pollCtx, stopPolling := context.WithCancel(ctx)
	go func() {
		res, err := ac.Wait(ctx, runID)
		close(ended)
		stopPolling()
		// The last lines come with the outcome: a query of a closed run
		// would make a worker replay it whole.
		tail, spent := res.Prints, res.Usage
		var re *temporal.RunError
		if errors.As(err, &re) {
			tail, spent = re.Prints, re.Usage
		}
		if spent != nil {
			r.spent = *spent
		}
		prints.finish(tail)
		follow.poll(ctx) // the events of the run's end
		done <- outcome{res.Text, err, time.Since(started)}
	}()
	// While the run goes on, a poller follows its lines, its trace and
	// its questions (each reported once, with how to answer it); it
	// stops once the run ended, so that it never queries a closed run,
	// which a worker answers by replaying it whole.
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		told := map[string]bool{}
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-ended:
				return
			case <-tick.C:
			}
			prints.poll(pollCtx)
			follow.poll(pollCtx)
			st, err := temporalRunState(pollCtx, c, runID)
			if err != nil {
				continue
			}
			for _, q := range st.Questions {
				if !told[q.ID] {
					told[q.ID] = true
					r.logger.Warnf("run %s waits for an answer to %q (asked at %s): aml answer %s %s --temporal %s", runID, q.Text, q.Source, runID, shellWord(q.ID+"="+answerExample(q)), t.address)
				}
			}
		}
	}()
	defer func() {
		stopPolling()
		<-polled
	}()
	select {
	case res := <-done:
		return r.finish(runID, res)
	case a := <-r.sigs:
		sig := a.sig
		r.logger.Warnf("received %s: no longer following run %s, which goes on without this process", signalName(sig), runID)
		if sig == syscall.SIGTERM {
			return exitSIGTERM
		}
		return exitSIGINT
	}
}

// traceFollower reads a run's trace events (temporal.TraceQuery) and
// hands them to sinks, in order, once each. poll is called from one
// goroutine at a time.
type traceFollower struct {
	c     *temporal.Client
	runID string
	sinks []eval.TraceSink

	mu        sync.Mutex
	execution string
	next      int
}

// poll hands the events the run produced since the last poll to the
// sinks.
func (f *traceFollower) poll(ctx context.Context) {
	if len(f.sinks) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for range 50 {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		page, err := f.c.Trace(qctx, f.runID, f.next)
		cancel()
		if err != nil {
			return // not started yet, or no worker to answer: next time
		}
		if page.Execution != f.execution && f.execution != "" && f.next > 0 {
			// The run continued as new: its sequence starts again.
			f.execution, f.next = page.Execution, 0
			continue
		}
		f.execution = page.Execution
		for _, e := range page.Events {
			for _, s := range f.sinks {
				_ = s.HandleTrace(e.Event())
			}
		}
		if page.Next == f.next || len(page.Events) == 0 {
			return
		}
		f.next = page.Next
	}
}

// printFollower reads a run's print() lines (temporal.PrintQuery) and
// prints them, in order, once each. poll is safe for concurrent use.
type printFollower struct {
	c     *temporal.Client
	runID string
	print func(string)

	mu        sync.Mutex
	execution string
	next      int
}

// poll prints the lines the run printed since the last poll.
func (f *printFollower) poll(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range 50 {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		page, err := f.c.Prints(qctx, f.runID, f.next)
		cancel()
		if err != nil {
			return // not started yet, or no worker to answer: next time
		}
		if page.Execution != f.execution && f.execution != "" {
			// The run continued as new: its lines start again.
			f.execution, f.next = page.Execution, 0
			continue
		}
		f.execution = page.Execution
		if page.Dropped > 0 {
			f.print(fmt.Sprintf("(%d lines the run no longer keeps)", page.Dropped))
		}
		for _, l := range page.Lines {
			f.print(l)
		}
		if page.Next == f.next || len(page.Lines) == 0 {
			return
		}
		f.next = page.Next
	}
}

// finish prints the lines of tail (the run's last lines, which its
// outcome carries) that poll has not printed.
func (f *printFollower) finish(tail *temporal.PrintPage) {
	if tail == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	first := tail.Next - len(tail.Lines)
	next := f.next
	if tail.Execution != f.execution {
		next = 0 // an execution the follower has not read
	}
	from := 0
	switch {
	case next > first:
		from = min(next-first, len(tail.Lines))
	case next < first:
		f.print(fmt.Sprintf("(%d lines the run no longer keeps)", first-next))
	}
	for _, l := range tail.Lines[from:] {
		f.print(l)
	}
	f.execution, f.next = tail.Execution, tail.Next
}

// temporalState names a run's Temporal status as aml runs does.
func temporalState(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "succeeded"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued"
	}
	return "unknown"
}

// runStateLabel is a run's state as aml runs and aml runs show print it:
// its Temporal status, or, for a running run that waits for answers,
// how many.
func runStateLabel(ctx context.Context, c client.Client, id string, status enumspb.WorkflowExecutionStatus) string {
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if st, err := temporalRunState(ctx, c, id); err == nil && len(st.Questions) > 0 {
			return fmt.Sprintf("waiting for an answer (%d question(s))", len(st.Questions))
		}
	}
	return temporalState(status)
}

// internalActivity reports whether an activity is Temporal's own
// machinery (a session's creation or completion) rather than an effect
// of the run.
func internalActivity(name string) bool {
	return strings.HasPrefix(name, "internalSession")
}

// memoWorkflow is the memo field that names a run's workflow file.
const memoWorkflow = "workflow"

func memoString(m *commonpb.Memo, key string) string {
	if m == nil || m.Fields[key] == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(m.Fields[key], &s); err != nil {
		return ""
	}
	return s
}

// listTemporalRuns is aml runs --temporal: the runs of the namespace,
// newest first.
func listTemporalRuns(t *temporalFlags, stdout, stderr io.Writer) int {
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml runs: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATE\tWORKFLOW\tSTARTED\tCLOSED")
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			// A run that continued as new is listed once, by its latest
			// execution.
			Namespace: t.namespace, Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", temporal.WorkflowName), NextPageToken: token,
		})
		if err != nil {
			fmt.Fprintf(stderr, "aml runs: listing the runs of namespace %s: %v\n", t.namespace, err)
			return exitFailure
		}
		for _, e := range resp.Executions {
			closed := "-"
			if ct := e.GetCloseTime(); ct != nil && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				closed = ct.AsTime().Local().Format("2006-01-02 15:04:05")
			}
			wf := memoString(e.Memo, memoWorkflow)
			if wf == "" {
				wf = "-"
			}
			state := runStateLabel(ctx, c, e.Execution.GetWorkflowId(), e.Status)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Execution.GetWorkflowId(), state, wf,
				e.GetStartTime().AsTime().Local().Format("2006-01-02 15:04:05"), closed)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	tw.Flush()
	return exitOK
}

// showTemporalRun is aml runs show RUN --temporal: the run's state, its
// effects as history records them, and its result or error.
func showTemporalRun(t *temporalFlags, runID string, stdout, stderr io.Writer) int {
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := c.DescribeWorkflow(ctx, runID, "")
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: run %s in namespace %s: %v\n", runID, t.namespace, err)
		return exitFailure
	}
	info := desc.RawResponse.WorkflowExecutionInfo
	fmt.Fprintf(stdout, "run:      %s\nstate:    %s\n", runID, runStateLabel(ctx, c, runID, info.Status))
	if wf := memoString(info.Memo, memoWorkflow); wf != "" {
		fmt.Fprintf(stdout, "workflow: %s\n", wf)
	}
	fmt.Fprintf(stdout, "started:  %s\n", info.GetStartTime().AsTime().Local().Format(time.RFC3339))
	type effect struct {
		label, state, worker string
		attempt              int32
	}
	var effects []*effect
	var result, failure string
	dc := converter.GetDefaultDataConverter()
	// A run that continued as new is a chain of executions: their
	// histories, oldest first, hold its effects.
	chain, err := executionChain(ctx, c, runID, info.GetExecution().GetRunId())
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: reading the history of run %s: %v\n", runID, err)
		return exitFailure
	}
	if len(chain) > 1 {
		fmt.Fprintf(stdout, "executions: %d (the run continued as new %d time(s), each resuming the journal of the ones before)\n", len(chain), len(chain)-1)
	}
	for _, execution := range chain {
		byScheduled := map[int64]*effect{}
		iter := c.GetWorkflowHistory(ctx, runID, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				fmt.Fprintf(stderr, "aml runs show: reading the history of run %s: %v\n", runID, err)
				return exitFailure
			}
			switch a := ev.Attributes.(type) {
			case *historypb.HistoryEvent_ActivityTaskScheduledEventAttributes:
				if internalActivity(a.ActivityTaskScheduledEventAttributes.GetActivityType().GetName()) {
					continue
				}
				e := &effect{label: activityLabel(dc, a.ActivityTaskScheduledEventAttributes), state: "scheduled"}
				if id := a.ActivityTaskScheduledEventAttributes.GetActivityId(); strings.Contains(id, "#") {
					// The effect's identity, as aml run --journal names it.
					e.label += " [" + id + "]"
				}
				effects = append(effects, e)
				byScheduled[ev.EventId] = e
			case *historypb.HistoryEvent_ActivityTaskStartedEventAttributes:
				if e := byScheduled[a.ActivityTaskStartedEventAttributes.ScheduledEventId]; e != nil {
					e.state, e.worker, e.attempt = "running", a.ActivityTaskStartedEventAttributes.Identity, a.ActivityTaskStartedEventAttributes.Attempt
				}
			case *historypb.HistoryEvent_ActivityTaskCompletedEventAttributes:
				if e := byScheduled[a.ActivityTaskCompletedEventAttributes.ScheduledEventId]; e != nil {
					e.state = "finished"
				}
			case *historypb.HistoryEvent_ActivityTaskFailedEventAttributes:
				if e := byScheduled[a.ActivityTaskFailedEventAttributes.ScheduledEventId]; e != nil {
					e.state = "failed: " + a.ActivityTaskFailedEventAttributes.GetFailure().GetMessage()
				}
			case *historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes:
				if e := byScheduled[a.ActivityTaskTimedOutEventAttributes.ScheduledEventId]; e != nil {
					e.state = "timed out"
				}
			case *historypb.HistoryEvent_ActivityTaskCanceledEventAttributes:
				if e := byScheduled[a.ActivityTaskCanceledEventAttributes.ScheduledEventId]; e != nil {
					e.state = "cancelled"
				}
			case *historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes:
				var res temporal.RunResult
				if p := a.WorkflowExecutionCompletedEventAttributes.GetResult().GetPayloads(); len(p) == 1 && dc.FromPayload(p[0], &res) == nil {
					result = res.Text
				}
			case *historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes:
				failure = a.WorkflowExecutionFailedEventAttributes.GetFailure().GetMessage()
			}
		}
	}
	if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if st, err := temporalRunState(ctx, c, runID); err == nil && len(st.Questions) > 0 {
			fmt.Fprintf(stdout, "questions (answer with aml answer %s ID=VALUE --temporal %s):\n", runID, t.address)
			for _, q := range st.Questions {
				line := fmt.Sprintf("  %s: %s", q.ID, q.Text)
				if q.Schema != nil {
					doc, _ := json.Marshal(q.Schema)
					line += " " + string(doc)
				}
				fmt.Fprintf(stdout, "%s (asked at %s)\n", line, q.Source)
			}
		}
	}
	fmt.Fprintf(stdout, "effects:  %d\n", len(effects))
	for _, e := range effects {
		line := "  " + e.label + ": " + e.state
		if e.worker != "" {
			line += " (" + e.worker
			if e.attempt > 1 {
				line += fmt.Sprintf(", attempt %d", e.attempt)
			}
			line += ")"
		}
		fmt.Fprintln(stdout, line)
	}
	if failure != "" {
		fmt.Fprintf(stdout, "error:\n  %s\n", strings.ReplaceAll(failure, "\n", "\n  "))
	}
	if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		fmt.Fprintf(stdout, "result:\n%s", result)
		if !strings.HasSuffix(result, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	return exitOK
}

// executionChain returns the executions of run id, oldest first, from
// the latest (last): each execution's first event names the one it
// continued.
func executionChain(ctx context.Context, c client.Client, id, last string) ([]string, error) {
	chain := []string{last}
	for len(chain) < 10000 {
		iter := c.GetWorkflowHistory(ctx, id, chain[0], false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !iter.HasNext() {
			break
		}
		ev, err := iter.Next()
		if err != nil {
			return nil, err
		}
		prev := ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			break
		}
		chain = append([]string{prev}, chain...)
	}
	return chain, nil
}

// activityLabel names an effect of a run's history by its activity: the
// agent and where it was authored, the script's command, the scope.
func activityLabel(dc converter.DataConverter, a *historypb.ActivityTaskScheduledEventAttributes) string {
	name := a.GetActivityType().GetName()
	p := a.GetInput().GetPayloads()
	if len(p) != 1 {
		return name
	}
	// An env() value travels as a token naming its variable.
	shown := func(s string) string {
		s = strings.ReplaceAll(s, "\x00aml-env:", "$")
		return strings.ReplaceAll(s, "\x00", "")
	}
	switch name {
	case temporal.AgentActivity:
		var call temporal.AgentCall
		if dc.FromPayload(p[0], &call) == nil {
			provider := call.Provider
			if provider == "" {
				provider = "default"
			}
			return fmt.Sprintf("agent %s at %s", provider, call.Source)
		}
	case temporal.ExecActivity:
		var call temporal.ExecCall
		if dc.FromPayload(p[0], &call) == nil {
			return "script " + shown(strings.Join(append([]string{call.Command}, call.Args...), " "))
		}
	case temporal.AcquireActivity:
		var call temporal.AcquireCall
		if dc.FromPayload(p[0], &call) == nil {
			label := "acquire " + call.Kind
			if call.Workspace != nil {
				label += fmt.Sprintf(" %q", call.Workspace.ID)
			}
			if call.Provider != "" && call.Kind != "host" {
				label += " (" + call.Provider + ")"
			}
			if call.Restore != "" {
				label += ", restored from its checkpoint"
			}
			return label
		}
	case temporal.FileActivity:
		var call temporal.FileCall
		if dc.FromPayload(p[0], &call) == nil {
			return strings.TrimSpace("file " + call.Op + " " + call.Path)
		}
	case temporal.SaveActivity:
		return "save the workspace"
	case temporal.ReleaseActivity:
		return "release"
	}
	return name
}

const cancelUsage = `usage: aml cancel RUN --temporal HOST:PORT [--namespace NS] [--grace D]

Cancels a run on Temporal: its workflow code stops at its next pause,
its agent sessions and scripts are cancelled on every worker (their
processes end), its scopes are released, and the run ends as cancelled.
A run that has not ended --grace after the request (no worker serves
it, or its workflow code does not pause) is terminated: its sessions and
scripts end at their next heartbeat, and the workers release what it
held within a minute. aml cancel says which it did.

Exit codes: 0 cancelled or terminated, 1 the run could not be cancelled
(not found, or it had ended already), 2 usage error.

Flags:
`

// cancelGrace is how long aml cancel waits for a cancelled run to end
// before it terminates it.
const cancelGrace = 30 * time.Second

func cmdCancel(args []string, stdout, stderr io.Writer) int {
	var t temporalFlags
	var grace time.Duration
	fs := newFlagSet("cancel", cancelUsage, stderr)
	t.register(fs, "the Temporal frontend address (default: TEMPORAL_ADDRESS)")
	fs.DurationVar(&grace, "grace", cancelGrace, "how long the run may take to end before it is terminated")
	fs.DurationVar(&grace, "wait", cancelGrace, "the former name of --grace")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "aml cancel: want exactly one run id")
		fs.Usage()
		return exitUsage
	}
	if grace < 0 {
		fmt.Fprintln(stderr, "aml cancel: --grace must not be negative")
		return exitUsage
	}
	if !t.addressFromEnv("cancel", stderr) {
		return exitUsage
	}
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml cancel: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Minute)
	defer cancel()
	res, err := temporal.NewClient(c, "").Cancel(ctx, pos[0], grace)
	switch {
	case errors.Is(err, temporal.ErrAlreadyEnded):
		fmt.Fprintf(stderr, "aml cancel: run %s had ended before it could be cancelled\n", pos[0])
		return exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "aml cancel: %v\n", err)
		return exitFailure
	case res.Terminated:
		fmt.Fprintf(stdout, "terminated %s: it did not end within %s of the cancel request (its sessions and scripts end at their next heartbeat; its workers release what it held)\n", pos[0], grace)
	default:
		fmt.Fprintf(stdout, "cancelled %s\n", pos[0])
	}
	return exitOK
}

// temporalRunState queries a running run's questions.
func temporalRunState(ctx context.Context, c client.Client, runID string) (temporal.RunState, error) {
	return temporal.NewClient(c, "").State(ctx, runID)
}

const answerUsage = `usage: aml answer RUN ID=VALUE... --temporal HOST:PORT [--namespace NS]

Answers questions a run on Temporal waits for (ask()): each VALUE is
checked against the question's schema (free text and string schemas take
VALUE as it is, others parse it as JSON), as aml resume --answer does,
and the run goes on with it. aml runs show RUN --temporal lists the
questions it waits for.

Exit codes: 0 answered, 1 the run could not be reached, 2 a usage error,
an id the run does not wait for, or an answer its schema refuses.

Flags:
`

func cmdAnswer(args []string, stdout, stderr io.Writer) int {
	var t temporalFlags
	fs := newFlagSet("answer", answerUsage, stderr)
	t.register(fs, "the Temporal frontend address (default: TEMPORAL_ADDRESS)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		fmt.Fprintln(stderr, "aml answer: want a run id and at least one ID=VALUE")
		fs.Usage()
		return exitUsage
	}
	if !t.addressFromEnv("answer", stderr) {
		return exitUsage
	}
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml answer: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runID := pos[0]
	st, err := temporalRunState(ctx, c, runID)
	if err != nil {
		fmt.Fprintf(stderr, "aml answer: run %s: %v\n", runID, err)
		return exitFailure
	}
	byID := map[string]eval.Question{}
	var ids []string
	for _, q := range st.Questions {
		byID[q.ID] = q
		ids = append(ids, q.ID)
	}
	answers := make([]temporal.Answer, 0, len(pos)-1)
	given := map[string]bool{}
	for _, a := range pos[1:] {
		id, raw, ok := strings.Cut(a, "=")
		if !ok || id == "" {
			fmt.Fprintf(stderr, "aml answer: %q: want ID=VALUE\n", a)
			return exitUsage
		}
		if given[id] {
			fmt.Fprintf(stderr, "aml answer: question %q is answered twice\n", id)
			return exitUsage
		}
		given[id] = true
		q, ok := byID[id]
		if !ok {
			if len(ids) == 0 {
				fmt.Fprintf(stderr, "aml answer: run %s waits for no question\n", runID)
			} else {
				fmt.Fprintf(stderr, "aml answer: run %s waits for no question %q; it waits for: %s\n", runID, id, strings.Join(ids, ", "))
			}
			return exitUsage
		}
		v, err := parseAnswer(q, raw)
		if err != nil {
			fmt.Fprintf(stderr, "aml answer: %v\n", err)
			return exitUsage
		}
		answers = append(answers, temporal.Answer{ID: id, Value: v})
	}
	if err := temporal.NewClient(c, "").Answer(ctx, runID, answers...); err != nil {
		fmt.Fprintf(stderr, "aml answer: run %s: %v\n", runID, err)
		return exitFailure
	}
	for _, a := range answers {
		fmt.Fprintf(stdout, "answered %s\n", a.ID)
	}
	return exitOK
}
