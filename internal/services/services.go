// Package services is the contract between the aml command
// (internal/cli) and the clients of outside services it can be built
// with: the Docker Engine, Modal, Daytona, S3, Temporal and an
// OpenTelemetry collector; and buildtools' lint, which brings protocol
// buffers along.
//
// Those clients bring large SDKs whose package initialisation costs
// tens of milliseconds at every start of a program that links them. So
// the aml executable (cmd/aml) links none of them, and its companion
// aml-full (cmd/aml-full, built by the same go install) links them all
// through package services/full. When an invocation needs one (a
// workflow that calls docker_sandbox(), aml sandbox prune, an s3://
// store, ...), aml runs aml-full in its place, the way git runs
// git-foo; see internal/cli's companion.go.
//
// This package itself imports no client: it holds the Set of functions
// a build links, the names of the builtins they add, and the plain
// types the functions exchange with the command.
package services

import (
	"context"
	"errors"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
	"github.com/aml-go/aml/temporal/wire"
)

// Builtins are the names of the builtins the service extensions add to
// workflows (Set.Extensions). aml, which links none of them, runs
// aml-full for a workflow that names one; full's tests hold the list to
// the extensions.
var Builtins = []string{"daytona_sandbox", "docker_sandbox", "kubernetes_sandbox", "modal_sandbox", "s3_workspace"}

// Set is what a build of aml links of the services: all of its fields
// set (package full's Linked), or none (the zero Set, aml without
// them). It is read-only once built; its functions are safe for
// concurrent use.
type Set struct {
	// Extensions returns the provider families of the services:
	// docker_sandbox(), s3_workspace(), daytona_sandbox(),
	// modal_sandbox() and kubernetes_sandbox().
	Extensions func(ExtensionOptions) []*starlib.Extension
	// OpenS3 opens the S3 workspace store s names (aml workspace check,
	// recover and unlock, and --blob-store).
	OpenS3 func(s S3) (persist.Storage, error)
	// VerifyS3 checks that the S3 service s names honours the S3
	// workspace's protocol (aml workspace verify).
	VerifyS3 func(ctx context.Context, s S3) (*S3Report, error)
	// PruneContainers removes the Docker sandbox containers that killed
	// aml processes of this machine left (aml sandbox prune). An error
	// wrapping ErrNoEngine says that no Docker engine answered.
	PruneContainers func(ctx context.Context) (ContainerPrune, error)
	// PruneRemote does the same for the remote sandboxes of the
	// services whose credentials the environment holds, by service
	// name.
	PruneRemote func(ctx context.Context) (map[string]remote.PruneResult, error)
	// Classify tells which of the services' failures err is.
	Classify func(err error) Failure
	// Lint is the buildtools lint of workflow files (aml check, the
	// language server): package buildlint's Findings.
	Lint func(path string, src []byte) []analysis.Finding
	// OTLP starts exporting trace events to an OpenTelemetry collector
	// over OTLP/HTTP (aml run --otlp-endpoint).
	OTLP func(ctx context.Context, opts OTLP) (TraceExporter, error)
	// DialTemporal connects to a Temporal service (aml run --temporal,
	// aml runs --temporal, aml cancel, aml answer, aml worker).
	DialTemporal func(wire.DialOptions) (Temporal, error)
}

// OTLP configures the OTLP exporter (package observe/otlp's Options).
type OTLP struct {
	// Endpoint is the collector's URL; "" takes the standard
	// OTEL_EXPORTER_OTLP_* variables.
	Endpoint string
	// CaptureContent exports prompts and output too.
	CaptureContent bool
	// OnError receives the failures of exports.
	OnError func(error)
}

// TraceExporter is a trace sink that exports; Shutdown flushes it.
type TraceExporter interface {
	eval.TraceSink
	Shutdown(ctx context.Context) error
}

// Temporal is a connection to a Temporal service, as package temporal's
// Client makes it (see there); its methods are safe for concurrent use.
type Temporal interface {
	Start(ctx context.Context, b *wire.Bundle, opts wire.StartOptions) (string, error)
	// Wait returns the run's result, or a *wire.RunError for how it
	// ended otherwise.
	Wait(ctx context.Context, id string) (wire.RunResult, error)
	Trace(ctx context.Context, id string, from int) (wire.TracePage, error)
	Prints(ctx context.Context, id string, from int) (wire.PrintPage, error)
	State(ctx context.Context, id string) (wire.RunState, error)
	Answer(ctx context.Context, id string, answers ...wire.Answer) error
	// Cancel's error wraps wire.ErrAlreadyEnded for a run that had
	// ended.
	Cancel(ctx context.Context, id string, grace time.Duration) (wire.Cancelled, error)
	Runs(ctx context.Context) ([]wire.RunSummary, error)
	Show(ctx context.Context, id string) (*wire.RunDetail, error)
	NewWorker(opts wire.WorkerOptions) TemporalWorker
	Close()
}

// TemporalWorker is a worker of a Temporal task queue (package
// temporal's Worker); its methods are safe for concurrent use.
type TemporalWorker interface {
	Start() error
	Stop()
	Sweep(ctx context.Context) (map[string]int, error)
	Held() int
	Release(ctx context.Context) error
}

// Linked reports whether s links the services.
func (s Set) Linked() bool { return s.Extensions != nil }

// ExtensionOptions configure the service extensions.
type ExtensionOptions struct {
	// Relay is the host path of the aml executable that runs in Docker
	// containers as their agents' tool relay.
	Relay string
	// Leftovers receives the containers of killed aml processes that a
	// Docker sandbox provider finds while the run goes on.
	Leftovers func([]Container)
}

// S3 names an S3 workspace store and how to reach it.
type S3 struct {
	Bucket, Prefix, Endpoint, Region, Profile string
	// ForcePathStyle addresses the bucket in the path, as S3-compatible
	// services need.
	ForcePathStyle bool
}

// Container is a Docker sandbox container a killed aml process left.
type Container struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Run is the evaluation id of the run that created it.
	Run string `json:"run"`
	// Owner is the marker of the aml process that created it.
	Owner string `json:"owner"`
}

// ContainerPrune is what PruneContainers found.
type ContainerPrune struct {
	// Removed are the containers of gone aml processes, now removed.
	Removed []Container `json:"removed"`
	// Busy are containers whose aml process still runs.
	Busy []Container `json:"busy"`
	// Foreign are containers another machine's aml process made.
	Foreign []Container `json:"foreign"`
}

// ErrNoEngine is wrapped by PruneContainers' error when no Docker
// engine answered.
var ErrNoEngine = errors.New("no Docker engine answered")

// ErrNotChecked is wrapped by one of the errors PruneRemote joins when a
// service whose configuration the environment holds could not be reached
// (a kubeconfig of a cluster that is down): its sandboxes were not
// checked, which is said, not a failure.
var ErrNotChecked = errors.New("not checked")

// S3Check is one operation of VerifyS3 and what the service did.
type S3Check struct {
	Operation string `json:"operation"`
	// Required checks must be honoured for AML to trust the service.
	Required bool   `json:"required"`
	Result   string `json:"result"`
	Detail   string `json:"detail,omitempty"`
}

// S3Report is what VerifyS3 found.
type S3Report struct {
	Bucket string    `json:"bucket"`
	Prefix string    `json:"prefix"`
	Checks []S3Check `json:"checks"`
	// Trusted is true when every required check was honoured.
	Trusted bool `json:"trusted"`
}

// Failure is a kind of failure of the services that the command gives
// its own error code.
type Failure int

const (
	// NoFailure: not one of the services' failures.
	NoFailure Failure = iota
	// S3Untrusted: the S3 service does not honour conditional writes.
	S3Untrusted
	// S3LockLost: the S3 workspace's writer lock was lost.
	S3LockLost
)
