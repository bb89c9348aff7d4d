package acp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/gateway"
)

// route is LaunchContext.Route: a gateway route for a metered session,
// else upstream unchanged. In a sandbox the agent reaches the route
// through aml model-relay, which the launch is wrapped in: a loopback
// port in the sandbox carried to the gateway's socket in the sandbox's
// shared directory.
func (s *session) route(upstream string) (string, error) {
	if s.meter == nil {
		return upstream, nil
	}
	g, err := gateway.Shared()
	if err != nil {
		return "", err
	}
	if s.sandbox != nil && s.modelRelay == nil {
		if err := s.startModelRelay(g); err != nil {
			return "", fmt.Errorf("provider %q: %w", s.p.cfg.Name, err)
		}
	}
	base, remove, err := g.RouteIn(s.runID, upstream, gatewayMeter{s})
	if err != nil {
		return "", fmt.Errorf("provider %q: %w", s.p.cfg.Name, err)
	}
	s.routes = append(s.routes, remove)
	if r := s.modelRelay; r != nil {
		u, err := url.Parse(base)
		if err != nil {
			return "", err
		}
		return "http://127.0.0.1:" + strconv.Itoa(r.port) + u.Path, nil
	}
	return base, nil
}

// modelRelay is how an agent in a sandbox reaches the gateway: aml
// model-relay (command) on a loopback port of the sandbox, carried to
// the gateway's socket (socket, as the sandbox sees it).
type modelRelay struct {
	command []string
	socket  string
	port    int
}

// guestRelay returns the command that runs aml in the sandbox (its
// tool relay's, without the "mcp-relay"), or an error saying why the
// sandbox has none.
func guestRelay(sb *eval.SandboxSession) (eval.GuestRuntime, []string, error) {
	gr, ok := sb.Runtime.(eval.GuestRuntime)
	if !ok {
		return nil, nil, errors.New("the sandbox cannot reach the host's model gateway (its runtime shares no directory with the host)")
	}
	cmd, err := gr.RelayCommand()
	if err != nil {
		return nil, nil, err
	}
	if len(cmd) == 0 || cmd[len(cmd)-1] != "mcp-relay" {
		return nil, nil, fmt.Errorf("the sandbox's relay %q is not aml's", cmd)
	}
	return gr, cmd[:len(cmd)-1], nil
}

// startModelRelay serves the gateway on a socket in the sandbox's shared
// directory and readies the relay the launch is wrapped in.
func (s *session) startModelRelay(g *gateway.Gateway) error {
	gr, cmd, err := guestRelay(s.sandbox)
	if err != nil {
		return err
	}
	host, guest := gr.SharedDirectory()
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	name := "gateway-" + hex.EncodeToString(raw[:]) + ".sock"
	stop, err := g.ServeSocket(host, name)
	if err != nil {
		return err
	}
	s.routes = append(s.routes, stop)
	// A port of the sandbox's loopback; a sandbox that shares the host's
	// network (network = "host") shares its ports too, so one is drawn
	// from the dynamic range.
	var p [2]byte
	if _, err := rand.Read(p[:]); err != nil {
		return err
	}
	port := 49152 + int(p[0])<<8%16000 + int(p[1])
	s.modelRelay = &modelRelay{command: cmd, socket: strings.TrimSuffix(guest, "/") + "/" + name, port: port}
	return nil
}

// wrap runs the launch under aml model-relay.
func (r *modelRelay) wrap(l *Launch) {
	args := append(append([]string{}, r.command[1:]...), "model-relay", "--socket", r.socket, "--port", strconv.Itoa(r.port), "--", l.Command)
	l.Command, l.Args = r.command[0], append(args, l.Args...)
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

// Record implements gateway.Meter: the call becomes a model.call span
// under the running turn (metadata only, with the OpenTelemetry GenAI
// attributes), or a model.call event where the trace takes no spans;
// Charge counted its spend.
func (m gatewayMeter) Record(c gateway.Call) {
	attrs := map[string]any{"gen_ai.operation.name": "chat", "aml.path": c.Path, "aml.stream": c.Stream,
		"http.response.status_code": int64(c.Status), "aml.latency_ms": float64(c.Latency.Microseconds()) / 1000}
	if c.Model != "" {
		attrs["gen_ai.request.model"] = c.Model
	}
	if c.Attempts > 1 {
		attrs["aml.attempts"], attrs["aml.waited_ms"] = int64(c.Attempts), c.Waited.Milliseconds()
	}
	if c.Usage.ModelCalls == 0 {
		attrs["aml.refused"] = true
	} else {
		attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"] = c.Usage.InputTokens, c.Usage.OutputTokens
		if c.Usage.CachedInputTokens > 0 {
			attrs["gen_ai.usage.cache_read.input_tokens"] = c.Usage.CachedInputTokens
		}
		if c.Usage.ReasoningTokens > 0 {
			attrs["gen_ai.usage.reasoning.output_tokens"] = c.Usage.ReasoningTokens
		}
	}
	if se, ok := m.s.trace.(eval.SpanEmitter); ok {
		failed := c.Err != nil || c.Status == 0 || c.Status >= 400
		se.Span("model", "model.call", time.Now().Add(-c.Latency), c.Latency, attrs, failed)
		return
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
