// Package temporaltest starts a real Temporal server for tests: the
// go.temporal.io/server binary that scripts/temporal-server.sh builds once
// per machine, with SQLite in a file of the test's temporary directory and
// every port on loopback chosen free, so that tests can stop and restart
// it without losing what it holds. A test that cannot get the binary is
// skipped with a message that says how to build it.
package temporaltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Namespace is the namespace every server of this package registers.
const Namespace = "default"

// ShortNamespace is a second namespace, whose runs Temporal asks to
// continue as new once their history holds ShortHistory events (4,096 in
// other namespaces): tests of long runs use it.
const (
	ShortNamespace = "short"
	ShortHistory   = 200
)

// Binary returns the path of the server binary: $AML_TEMPORAL_SERVER, or
// temporal-server in $AML_TEMPORAL_DIR (default ~/.cache/aml-temporal),
// with the error that says how to build it when it is absent.
func Binary() (string, error) {
	if p := os.Getenv("AML_TEMPORAL_SERVER"); p != "" {
		return p, nil
	}
	dir := os.Getenv("AML_TEMPORAL_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory to find the Temporal server in: %w", err)
		}
		dir = filepath.Join(home, ".cache", "aml-temporal")
	}
	p := filepath.Join(dir, "temporal-server")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the Temporal server is not built (%w): scripts/temporal-server.sh builds it from the module proxy (about 15 minutes, once), or set AML_TEMPORAL_SERVER; .ci/run builds it when it is not cached", err)
	}
	return p, nil
}

// Server is a running Temporal server. Its methods are safe for use by
// one test goroutine at a time.
type Server struct {
	// Address is the frontend's host:port.
	Address string

	bin, dir, config string
	log              *lockedBuffer
	stock            bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Options configure StartWith.
type Options struct {
	// Stock runs the server with Temporal's own dynamic configuration, as
	// users run it (several task-queue partitions, the default poll
	// rates), instead of this package's tuning for one machine; only
	// ShortNamespace's continue-as-new suggestion is set.
	Stock bool
}

// Start starts a server for t, registers Namespace and waits until a
// client can use it; t's cleanup stops it. t is skipped when the binary is
// absent.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Skip(err.Error())
	}
	dir := t.TempDir()
	s := &Server{bin: bin, dir: dir, config: filepath.Join(dir, "config.yaml"), log: &lockedBuffer{}, stock: opts.Stock}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("Temporal server log (tail):\n%s", s.log.tail(4000))
		}
	})
	// The ports are free when chosen, not when the server binds them: a
	// process beside it (another server, a client's outgoing connection)
	// may take one between. A server that exits at start because a port
	// was taken is started again on other ports.
	for attempt := 1; ; attempt++ {
		ports, err := choosePorts(10)
		if err != nil {
			t.Fatal(err)
		}
		s.Address = fmt.Sprintf("127.0.0.1:%d", ports[0])
		if err := s.writeConfig(ports); err != nil {
			t.Fatal(err)
		}
		err = s.start()
		if err == nil {
			break
		}
		if attempt == 3 || !errors.Is(err, errPortTaken) {
			t.Fatal(err)
		}
		t.Logf("the Temporal server found a port taken (attempt %d), starting it on others", attempt)
		s.log.reset()
	}
	if err := s.register(); err != nil {
		t.Fatalf("register namespace %q: %v\nserver log (tail):\n%s", Namespace, err, s.log.tail(4000))
	}
	return s
}

// Dial returns a client of Namespace; t's cleanup closes it.
func (s *Server) Dial(t testing.TB) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.Address, Namespace: Namespace, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Stop kills the server and waits for it. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart stops the server and starts it again on the same address and
// database, and waits until the namespace answers.
func (s *Server) Restart() error {
	s.Stop()
	if err := s.start(); err != nil {
		return err
	}
	return s.ready(Namespace)
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, "--config-file", s.config, "--allow-no-auth", "start")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the Temporal server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			log := s.log.tail(4000)
			if s.log.contains("address already in use") || s.log.contains("Failed to start gRPC listener") {
				return fmt.Errorf("%w: the Temporal server exited at start:\n%s", errPortTaken, log)
			}
			return fmt.Errorf("the Temporal server exited at start:\n%s", log)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Address, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal server did not listen on %s within 60 s:\n%s", s.Address, s.log.tail(4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// register registers Namespace (once per database) and waits until the
// frontend serves it.
func (s *Server) register() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := client.NewNamespaceClient(client.Options{HostPort: s.Address, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, ns := range []string{Namespace, ShortNamespace} {
		for {
			err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace:                        ns,
				WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
			})
			var exists *serviceerror.NamespaceAlreadyExists
			if err == nil || errors.As(err, &exists) {
				break
			}
			if ctx.Err() != nil {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := s.ready(ns); err != nil {
			return err
		}
	}
	return nil
}

// ready waits until namespace answers a list of its workflows.
func (s *Server) ready(namespace string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		c, err := client.Dial(client.Options{HostPort: s.Address, Namespace: namespace, Logger: quietLogger{}})
		if err == nil {
			_, err = c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1})
			c.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("namespace %q did not answer within 60 s: %w", namespace, last)
}

// errPortTaken is wrapped when the server exited at start because a port
// of its configuration was taken.
var errPortTaken = errors.New("a port was taken")

// choosePorts chooses a server's ports (the tests of the package
// replace it).
var choosePorts = freePorts

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (s *Server) writeConfig(p []int) error {
	dyn := filepath.Join(s.dir, "dynamicconfig.yaml")
	doc := dynamicConfig
	if s.stock {
		doc = stockDynamicConfig
	}
	if err := os.WriteFile(dyn, []byte(doc), 0o644); err != nil {
		return err
	}
	var buf bytes.Buffer
	err := configTemplate.Execute(&buf, map[string]any{
		"DB": filepath.Join(s.dir, "temporal.db"), "Dynamic": dyn, "P": p,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(s.config, buf.Bytes(), 0o644)
}

// dynamicConfig makes a fresh namespace usable at once, gives each task
// queue one partition (as a single-node development server should: with
// several, a task and the poller that would take it can sit in different
// partitions until one is forwarded), and lifts the history service's
// limit of 20 queue polls a second, which otherwise adds up to 50 ms to
// every task once a run is busy.
const dynamicConfig = `system.namespaceCacheRefreshInterval:
  - value: 100ms
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
frontend.enableUpdateWorkflowExecution:
  - value: true
frontend.enableUpdateWorkflowExecutionAsyncAccepted:
  - value: true
history.transferProcessorMaxPollRPS:
  - value: 10000
history.timerProcessorMaxPollRPS:
  - value: 10000
history.visibilityProcessorMaxPollRPS:
  - value: 10000
matching.numTaskqueueReadPartitions:
  - value: 1
matching.numTaskqueueWritePartitions:
  - value: 1
limit.historyCount.suggestContinueAsNew:
  - value: 200
    constraints:
      namespace: "short"
`

// stockDynamicConfig leaves Temporal's defaults as they are, but for the
// continue-as-new suggestion of ShortNamespace.
const stockDynamicConfig = `limit.historyCount.suggestContinueAsNew:
  - value: 200
    constraints:
      namespace: "short"
`

// sqliteStore is a datastore of the configuration: both stores share the
// database file, one connection each.
const sqliteStore = `{{define "sqlite"}}      sql:
        pluginName: "sqlite"
        databaseName: "{{.DB}}"
        connectAddr: "localhost"
        connectProtocol: "tcp"
        connectAttributes:
          cache: "private"
          setup: true
          journal_mode: wal
          synchronous: 1
        maxConns: 1
        maxIdleConns: 1
        maxConnLifetime: "1h"
{{end}}`

var configTemplate = template.Must(template.Must(template.New("config").Parse(sqliteStore)).Parse(`log:
  stdout: true
  level: warn
persistence:
  defaultStore: sqlite-default
  visibilityStore: sqlite-visibility
  numHistoryShards: 1
  datastores:
    sqlite-default:
{{template "sqlite" .}}    sqlite-visibility:
{{template "sqlite" .}}global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  pprof:
    port: 0
services:
  frontend:
    rpc:
      grpcPort: {{index .P 0}}
      membershipPort: {{index .P 1}}
      bindOnLocalHost: true
      httpPort: {{index .P 2}}
  matching:
    rpc:
      grpcPort: {{index .P 3}}
      membershipPort: {{index .P 4}}
      bindOnLocalHost: true
  history:
    rpc:
      grpcPort: {{index .P 5}}
      membershipPort: {{index .P 6}}
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: {{index .P 7}}
      membershipPort: {{index .P 8}}
      bindOnLocalHost: true
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:{{index .P 0}}"
      httpAddress: "127.0.0.1:{{index .P 2}}"
dcRedirectionPolicy:
  policy: "noop"
dynamicConfigClient:
  filepath: "{{.Dynamic}}"
  pollInterval: "10s"
`))

// lockedBuffer keeps the server's output for a failing test's log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) contains(sub string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf.Bytes(), []byte(sub))
}

func (b *lockedBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}

// quietLogger drops the SDK's logs: a test reports what it checks.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
