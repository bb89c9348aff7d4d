// Package full links the clients of outside services into a build of
// aml: the Docker Engine, Modal, Daytona, Kubernetes, S3, Temporal and the OTLP
// trace exporter, and buildtools' lint (Linked, a
// services.Set with every function set). aml-full (cmd/aml-full)
// imports it; aml does not, so that it starts without their SDKs.
package full

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"

	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/observe/otlp"
	"github.com/aml-go/aml/providers/sandbox/daytona"
	"github.com/aml-go/aml/providers/sandbox/docker"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/providers/workspace/persist"
	s3ws "github.com/aml-go/aml/providers/workspace/s3"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis/buildlint"
	"github.com/aml-go/aml/starlib/dockerstar"
	"github.com/aml-go/aml/starlib/remotestar"
	"github.com/aml-go/aml/starlib/s3star"
	"github.com/aml-go/aml/temporal"
	"github.com/aml-go/aml/temporal/wire"
)

// Linked is the Set of every service this package links. Its functions
// are safe for concurrent use.
var Linked = services.Set{
	Extensions:      extensions,
	OpenS3:          openS3,
	VerifyS3:        verifyS3,
	PruneContainers: pruneContainers,
	PruneRemote:     pruneRemote,
	Classify:        classify,
	DialTemporal:    dialTemporal,
	OTLP:            newOTLP,
	Lint:            buildlint.Findings,
}

func newOTLP(ctx context.Context, o services.OTLP) (services.TraceExporter, error) {
	return otlp.New(ctx, otlp.Options{Endpoint: o.Endpoint, CaptureContent: o.CaptureContent, OnError: o.OnError})
}

func dialTemporal(o wire.DialOptions) (services.Temporal, error) {
	c, err := temporal.Dial(o)
	if err != nil {
		return nil, err
	}
	return temporalClient{c}, nil
}

// temporalClient is a temporal.Client whose NewWorker returns the
// contract's interface.
type temporalClient struct{ *temporal.Client }

func (c temporalClient) NewWorker(opts wire.WorkerOptions) services.TemporalWorker {
	return c.Client.NewWorker(opts)
}

func extensions(opts services.ExtensionOptions) []*starlib.Extension {
	var leftovers func([]docker.Leftover)
	if opts.Leftovers != nil {
		leftovers = func(found []docker.Leftover) { opts.Leftovers(containers(found)) }
	}
	return []*starlib.Extension{
		s3star.Extension,
		// Agents in Docker sandboxes reach their tools through the
		// relay, mounted into the container. Containers that killed
		// aml processes left are reported to the run going on.
		dockerstar.New(dockerstar.Options{Relay: opts.Relay, Leftovers: leftovers}),
		// Remote sandboxes (Daytona, Modal) run the aml of their image.
		remotestar.Extension,
	}
}

func s3Options(s services.S3) s3ws.Options {
	return s3ws.Options{Bucket: s.Bucket, Prefix: s.Prefix, Endpoint: s.Endpoint, Region: s.Region, Profile: s.Profile, ForcePathStyle: s.ForcePathStyle}
}

func openS3(s services.S3) (persist.Storage, error) {
	return s3ws.NewStorage(s3Options(s))
}

func verifyS3(ctx context.Context, s services.S3) (*services.S3Report, error) {
	cli, err := s3ws.NewClient(s3Options(s))
	if err != nil {
		return nil, err
	}
	rep, err := s3ws.Verify(ctx, cli, s.Bucket, s.Prefix)
	if err != nil {
		return nil, err
	}
	out := &services.S3Report{Bucket: rep.Bucket, Prefix: rep.Prefix, Trusted: rep.Trusted, Checks: make([]services.S3Check, len(rep.Checks))}
	for i, c := range rep.Checks {
		out.Checks[i] = services.S3Check(c)
	}
	return out, nil
}

func containers(ls []docker.Leftover) []services.Container {
	if ls == nil {
		return nil
	}
	out := make([]services.Container, len(ls))
	for i, l := range ls {
		out[i] = services.Container(l)
	}
	return out
}

func pruneContainers(ctx context.Context) (services.ContainerPrune, error) {
	res, err := docker.Prune(ctx, nil)
	if err != nil && client.IsErrConnectionFailed(err) {
		err = noEngine{err}
	}
	return services.ContainerPrune{Removed: containers(res.Removed), Busy: containers(res.Busy), Foreign: containers(res.Foreign)}, err
}

// noEngine is the Docker client's error when no engine answered: its
// text unchanged, and errors.Is(services.ErrNoEngine).
type noEngine struct{ error }

func (e noEngine) Unwrap() error        { return e.error }
func (e noEngine) Is(target error) bool { return target == services.ErrNoEngine }

// remoteServices are the remote sandbox services whose credentials the
// environment holds.
func remoteServices() []remote.Service {
	var out []remote.Service
	if os.Getenv("DAYTONA_API_KEY") != "" {
		if svc, err := daytona.New(daytona.Options{}); err == nil {
			out = append(out, svc)
		}
	}
	home, _ := os.UserHomeDir()
	if _, err := os.Stat(filepath.Join(home, ".modal.toml")); os.Getenv("MODAL_TOKEN_ID") != "" || err == nil {
		if svc, err := modal.New(modal.Options{}); err == nil {
			out = append(out, svc)
		}
	}
	// A cluster is configured when KUBECONFIG is set, ~/.kube/config
	// exists, or aml runs in a pod: kubernetes.New finds none otherwise.
	// A cluster that does not answer is given ten seconds.
	if svc, err := kubernetes.New(kubernetes.Options{RequestTimeout: 10 * time.Second}); err == nil {
		out = append(out, svc)
	}
	return out
}

func pruneRemote(ctx context.Context) (map[string]remote.PruneResult, error) {
	out := map[string]remote.PruneResult{}
	var errs []error
	for _, svc := range remoteServices() {
		r, rerr := remote.Prune(ctx, svc)
		out[svc.Name()] = r
		if errors.Is(rerr, kubernetes.ErrUnreachable) {
			rerr = notChecked{svc.Name(), rerr}
		}
		if rerr != nil {
			errs = append(errs, rerr)
		}
		if c, ok := svc.(interface{ Close() }); ok {
			c.Close()
		}
	}
	return out, errors.Join(errs...)
}

// notChecked is the error of a service that could not be reached:
// errors.Is(services.ErrNotChecked).
type notChecked struct {
	service string
	err     error
}

func (e notChecked) Error() string        { return "no " + e.service + " sandboxes checked: " + e.err.Error() }
func (e notChecked) Unwrap() error        { return e.err }
func (e notChecked) Is(target error) bool { return target == services.ErrNotChecked }

func classify(err error) services.Failure {
	switch {
	case errors.Is(err, s3ws.ErrUntrusted):
		return services.S3Untrusted
	case errors.Is(err, s3ws.ErrLockLost):
		return services.S3LockLost
	}
	return services.NoFailure
}
