package acp

import (
	"fmt"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/gateway"
)

// route is LaunchContext.Route: a gateway route for a metered session,
// else upstream unchanged.
func (s *session) route(upstream string) (string, error) {
	if s.meter == nil || s.sandbox != nil {
		return upstream, nil
	}
	g, err := gateway.Shared()
	if err != nil {
		return "", err
	}
	base, remove, err := g.Route(upstream, gatewayMeter{s})
	if err != nil {
		return "", fmt.Errorf("provider %q: %w", s.p.cfg.Name, err)
	}
	s.routes = append(s.routes, remove)
	return base, nil
}

// gatewayMeter is a session's gateway.Meter: its calls are charged to
// the session's budgets, and one that a budget refuses or that crosses a
// budget stops the running turn.
type gatewayMeter struct{ s *session }

// Allow implements gateway.Meter.
func (m gatewayMeter) Allow() error {
	if err := m.s.meter.Reserve(); err != nil {
		m.s.stop(err)
		return err
	}
	return nil
}

// Record implements gateway.Meter: the call is traced (metadata only);
// Charge counted its spend.
func (m gatewayMeter) Record(c gateway.Call) {
	attrs := map[string]any{"path": c.Path, "status": int64(c.Status), "stream": c.Stream, "latencyMs": float64(c.Latency.Microseconds()) / 1000}
	if c.Model != "" {
		attrs["model"] = c.Model
	}
	if c.Usage.ModelCalls == 0 {
		attrs["refused"] = true
	} else {
		attrs["inputTokens"], attrs["outputTokens"] = c.Usage.InputTokens, c.Usage.OutputTokens
		if c.Usage.CachedInputTokens > 0 {
			attrs["cachedInputTokens"] = c.Usage.CachedInputTokens
		}
		if c.Usage.ReasoningTokens > 0 {
			attrs["reasoningTokens"] = c.Usage.ReasoningTokens
		}
	}
	m.s.trace.Event("model.call", attrs, nil)
}

// Charge implements gateway.Meter: what a call spent counts toward the
// session's budgets as soon as the answer says it.
func (m gatewayMeter) Charge(model string, u eval.Usage) {
	if err := m.s.meter.Charge(u, model); err != nil {
		m.s.stop(err)
	}
}

// stop ends the running turn with err as its cause.
func (s *session) stop(err error) {
	s.mu.Lock()
	stop := s.stopTurn
	s.mu.Unlock()
	if stop != nil {
		stop(err)
	}
}
