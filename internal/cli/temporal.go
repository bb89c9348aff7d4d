package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal/wire"
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
func (t *temporalFlags) dial() (services.Temporal, error) {
	if t.namespace == "" {
		t.namespace = os.Getenv("TEMPORAL_NAMESPACE")
	}
	if t.namespace == "" {
		t.namespace = "default"
	}
	if !linked.Linked() {
		return nil, errNotLinked("Temporal")
	}
	if t.blobStore == "" {
		t.blobStore = os.Getenv("AML_TEMPORAL_BLOB_STORE")
	}
	if t.blobStore != "" {
		st, err := (&storeFlags{}).openStore(t.blobStore)
		if err != nil {
			return nil, fmt.Errorf("--blob-store: %w", err)
		}
		t.store = st
	}
	return linked.DialTemporal(wire.DialOptions{Address: t.address, Namespace: t.namespace, TaskQueue: t.taskQueue, Blobs: t.store})
}

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
	b, err := wire.Pack(file)
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
	ac := c
	// The spend flags and --prices travel with the run, as the limits do.
	runID, err := ac.Start(ctx, b, wire.StartOptions{Entry: f.entry, Limits: &limits, Budget: opts.Budget, Prices: opts.Prices, Memo: map[string]any{wire.MemoWorkflow: filepath.Base(file)}})
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
		var re *wire.RunError
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
			st, err := c.State(pollCtx, runID)
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
	c     services.Temporal
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
	c     services.Temporal
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
func (f *printFollower) finish(tail *wire.PrintPage) {
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
