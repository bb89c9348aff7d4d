package starlib_test

import (
	"context"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// toolCalls is the number of tool calls one benchmark iteration makes.
const toolCalls = 1000

const toolBenchSource = `
lookup = define_tool(
    name = "lookup",
    description = "Look up one order.",
    input = schema.object(id = schema.string(min_length = 1), limit = schema.optional(schema.integer(minimum = 1))),
    output = schema.object(id = schema.string(), total = schema.integer()),
    execute = lambda input: {"id": input["id"], "total": len(input["id"])},
)

def component_calls():
    total = 0
    for i in range(N):
        total += lookup(id = "order-%d" % i, limit = 5)["total"]
    return str(total)

def _model(req):
    total = 0
    for i in range(N):
        total += req.call_tool("lookup", {"id": "order-%d" % i})["total"]
    return str(total)

configure(agent_provider = deterministic_agent(respond = _model), max_agent_calls = 0)

def agent_calls():
    return agent(tool(lookup), "go")
`

// BenchmarkToolCall measures tool calls with input and output validation,
// from component code and through a model's req.call_tool; ns/op covers
// toolCalls calls plus one evaluation.
func BenchmarkToolCall(b *testing.B) {
	src := []byte("N = 1000\n" + toolBenchSource)
	w, err := starlib.LoadFile("bench.star", starlib.LoadOptions{Source: src})
	if err != nil {
		b.Fatal(err)
	}
	for _, entry := range []string{"component_calls", "agent_calls"} {
		b.Run(entry, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := w.Evaluate(context.Background(), entry, eval.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if out == "" {
					b.Fatal("empty result")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*toolCalls), "ns/call")
		})
	}
}
