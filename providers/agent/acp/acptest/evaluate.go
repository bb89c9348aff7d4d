package acptest

import (
	"context"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
)

// Evaluate evaluates node as a run does (with rec's trace when rec is not
// nil), bounded by three minutes, and logs how long it took: the agent
// packages' end-to-end tests run their workflows through it. It fails t
// when the evaluator cannot be made.
func Evaluate(t testing.TB, node any, rec *tracetest.Recorder) (string, error) {
	t.Helper()
	opts := eval.Options{}
	if rec != nil {
		opts.Trace = []eval.TraceSink{rec}
	}
	rt, err := eval.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	defer func() { t.Logf("evaluated in %v", time.Since(start).Round(time.Millisecond)) }()
	return rt.Evaluate(ctx, node)
}
