package starlib_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
	"github.com/aml-go/aml/starlib"
)

// TestConfigureSpend: configure()'s budget, prices and rate limits reach
// the workflow's configuration as given.
func TestConfigureSpend(t *testing.T) {
	src := `configure(
    budget = {"tokens": 1000, "cost_usd": 2.5, "model_calls": 10, "tool_calls": 3, "wall_s": 1.5, "on_exceed": "ask"},
    prices = {"gpt-x": {"input": 2, "output": 8, "cached_input": 0.5}},
    rate_limits = {"api.openai.com": {"concurrent": 2, "rpm": 500, "tpm": 100000}},
)
def main():
    return "x"
`
	wf, err := starlib.LoadFile(filepath.Join(t.TempDir(), "w.star"), starlib.LoadOptions{Source: []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	c := wf.Config
	wantBudget := eval.Budget{Tokens: 1000, CostUSD: 2.5, ModelCalls: 10, ToolCalls: 3, Wall: 1500 * time.Millisecond, OnExceed: "ask"}
	if c.Budget == nil || *c.Budget != wantBudget {
		t.Errorf("budget %+v, want %+v", c.Budget, wantBudget)
	}
	if !reflect.DeepEqual(c.Prices, map[string]eval.Price{"gpt-x": {Input: 2, Output: 8, CachedInput: 0.5}}) {
		t.Errorf("prices %+v", c.Prices)
	}
	if !reflect.DeepEqual(c.RateLimits, map[string]gateway.Limit{"api.openai.com": {Concurrent: 2, RPM: 500, TPM: 100000}}) {
		t.Errorf("rate limits %+v", c.RateLimits)
	}
	var opts eval.Options
	wf.ApplyConfig(&opts)
	if opts.Budget == nil || *opts.Budget != wantBudget || len(opts.Prices) != 1 {
		t.Errorf("ApplyConfig: budget %+v, prices %+v", opts.Budget, opts.Prices)
	}
}
