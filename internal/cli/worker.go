package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/charmbracelet/log"

	"github.com/aml-go/aml/temporal/wire"
)

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
	// env() values in history are sealed with the journal key, which
	// every worker of a task queue must share (AML_JOURNAL_KEY_FILE).
	key, _, _, err := journalKey()
	if err != nil {
		logger.Error(fmt.Sprintf("the key that seals env() values: %v", err))
		return exitFailure
	}
	w := c.NewWorker(wire.WorkerOptions{
		MaxAgents:       maxAgents.v,
		DeadlockTimeout: deadlock,
		Identity:        fmt.Sprintf("aml-worker@%s:%d", host, os.Getpid()),
		MaxSessions:     maxLeases,
		Extensions:      extensions(),
		EnvKey:          key,
		ErrorCode:       errorCode,
	})
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
			released, err := w.Sweep(sctx)
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
	if n := w.Held(); n > 0 {
		logger.Infof("releasing %d sandbox and workspace lease(s) held here", n)
	}
	if err := w.Release(rctx); err != nil {
		logger.Error(fmt.Sprintf("releasing the leases held here: %v", err))
		return exitFailure
	}
	return exitOK
}

// leaseSweepInterval is how often aml worker releases the leases of
// runs that ended without releasing them (temporal.WorkerLeases.Sweep).
const leaseSweepInterval = 20 * time.Second

// maxLeases bounds the sandbox and workspace scopes one worker holds at
// once (Temporal sessions).
const maxLeases = 1000
