package modal_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/modaldouble"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// benchProviders are the Modal provider over the double (through the
// official SDK) and the Docker sandbox on the double's engine.
func benchProviders(b *testing.B) (map[string]eval.SandboxProvider, *remotetest.Docker) {
	d := modaldouble.New(b)
	rp, err := remote.New(remote.Options{Service: newService(b, d, modal.Options{}, nil), GuestRoot: "/workspace"})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]eval.SandboxProvider{"modal": rp, "docker": remotetest.DockerBeside(b, d.Docker())}, d.Docker()
}

// BenchmarkAcquireRelease: acquire and release of a 1,000-file, 20 MB
// workspace through the Modal double, beside the Docker sandbox.
func BenchmarkAcquireRelease(b *testing.B) {
	ps, d := benchProviders(b)
	remotetest.BenchAcquireRelease(b, d, ps)
}

// BenchmarkExec: the round trip of one short command.
func BenchmarkExec(b *testing.B) {
	ps, _ := benchProviders(b)
	remotetest.BenchExec(b, ps)
}

// BenchmarkServiceCalls: the Modal calls of one read-write lease without
// the provider (remotetest.BenchServiceCalls), the floor under
// BenchmarkAcquireRelease.
func BenchmarkServiceCalls(b *testing.B) {
	d := modaldouble.New(b)
	remotetest.BenchServiceCalls(b, d.Docker(), newService(b, d, modal.Options{}, nil), "/workspace")
}
