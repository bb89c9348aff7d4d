package daytona

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// benchProviders are the Daytona provider over the double (every request
// checked against the published API) and the Docker sandbox on the
// double's engine, for the same measurements.
func benchProviders(b *testing.B) (map[string]eval.SandboxProvider, *remotetest.Docker) {
	dbl := daytonadouble.New(b)
	rp, err := remote.New(remote.Options{Service: newService(b, dbl, nil), GuestRoot: "workspace"})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]eval.SandboxProvider{"daytona": rp, "docker": remotetest.DockerBeside(b, dbl.Docker())}, dbl.Docker()
}

// BenchmarkAcquireRelease: acquire and release of a 1,000-file, 20 MB
// workspace through the Daytona double, beside the Docker sandbox.
func BenchmarkAcquireRelease(b *testing.B) {
	ps, d := benchProviders(b)
	remotetest.BenchAcquireRelease(b, d, ps)
}

// BenchmarkExec: the round trip of one short command.
func BenchmarkExec(b *testing.B) {
	ps, _ := benchProviders(b)
	remotetest.BenchExec(b, ps)
}

// BenchmarkServiceCalls: the Daytona calls of one read-write lease
// without the provider (remotetest.BenchServiceCalls), the floor under
// BenchmarkAcquireRelease.
func BenchmarkServiceCalls(b *testing.B) {
	dbl := daytonadouble.New(b)
	remotetest.BenchServiceCalls(b, dbl.Docker(), newService(b, dbl, nil), "workspace")
}
