package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/eval"
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
}

// register adds --temporal, --namespace and --task-queue to fs.
func (t *temporalFlags) register(fs *flag.FlagSet, addressHelp string) {
	fs.StringVar(&t.address, "temporal", "", addressHelp)
	fs.StringVar(&t.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE, else default)")
	fs.StringVar(&t.taskQueue, "task-queue", defaultTaskQueue, "Temporal task queue of the AML workers")
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
	c, err := client.Dial(client.Options{HostPort: t.address, Namespace: t.namespace, Logger: sdkLogger{}})
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
	fs.DurationVar(&deadlock, "deadlock-timeout", 30*time.Second, "how long workflow code may run without yielding before Temporal fails the task")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "aml worker: unexpected arguments %q\n", pos)
		fs.Usage()
		return exitUsage
	}
	if t.address == "" {
		t.address = os.Getenv("TEMPORAL_ADDRESS")
	}
	if t.address == "" {
		fmt.Fprintln(stderr, "aml worker: no Temporal service: give --temporal HOST:PORT or set TEMPORAL_ADDRESS")
		return exitUsage
	}
	if !maxAgents.set {
		maxAgents.v = 4
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
	})
	temporal.Register(w, temporal.Options{Extensions: extensions()})
	if err := w.Start(); err != nil {
		logger.Error(fmt.Sprintf("cannot start the worker: %v", err))
		return exitFailure
	}
	logger.Infof("worker %d serving task queue %s of namespace %s on %s (%d concurrent agents)", os.Getpid(), t.taskQueue, t.namespace, t.address, maxAgents.v)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sig := <-sigs
	logger.Infof("received %s: stopping (sessions in flight run again on another worker)", signalName(sig))
	w.Stop()
	return exitOK
}

// runTemporal is aml run --temporal: the workflow file and its modules are
// packed and submitted as a run, whose result is printed as aml run
// prints it (or, with --detach, its id alone).
func runTemporal(f *runFlags, t *temporalFlags, detach bool, file string, stdout, stderr io.Writer) int {
	r := newRunner(f, file, stdout, stderr)
	defer r.close()
	// The workflow loads here first, so that its mistakes are reported
	// before anything is submitted, with the positions aml run gives.
	if _, err := starlib.LoadFile(file, starlib.LoadOptions{Print: func(string) {}, Extensions: extensions()}); err != nil {
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
	runID := "aml-" + eval.NewRunID()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: t.taskQueue}, temporal.WorkflowName, temporal.RunInput{Bundle: b, Entry: f.entry})
	if err != nil {
		r.logger.Error(fmt.Sprintf("cannot start the run on Temporal at %s: %v", t.address, err))
		return exitFailure
	}
	if detach {
		fmt.Fprintln(stdout, runID)
		return exitOK
	}
	r.logger.Infof("started run %s for %s on Temporal at %s (namespace %s, task queue %s)", runID, file, t.address, t.namespace, t.taskQueue)
	signal.Notify(r.sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(r.sigs)
	started := time.Now()
	done := make(chan outcome, 1)
	go func() {
		var res temporal.RunResult
		err := run.Get(ctx, &res)
		done <- outcome{res.Text, runError(err), time.Since(started)}
	}()
	select {
	case res := <-done:
		return r.finish(runID, res)
	case sig := <-r.sigs:
		r.logger.Warnf("received %s: no longer following run %s, which goes on without this process", signalName(sig), runID)
		if sig == syscall.SIGTERM {
			return exitSIGTERM
		}
		return exitSIGINT
	}
}

// runError turns a run's workflow failure into the evaluation's message.
func runError(err error) error {
	if err == nil {
		return nil
	}
	var ae *sdktemporal.ApplicationError
	if errors.As(err, &ae) {
		return errors.New(ae.Message())
	}
	return err
}
