package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/aml-go/aml/internal/jsonstr"
	"strconv"
	"strings"
	"unicode/utf8"
)

// turnRecord is one turn of a recorded agent session.
type turnRecord struct {
	Index      int    `json:"index"`
	Kind       string `json:"kind"`
	SessionID  string `json:"sessionId,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
	Usage      string `json:"usage,omitempty"`
}

func turnOf(index int, kind string, r *AgentResponse) turnRecord {
	usage := r.Usage
	if usage == "" && r.Spent != nil {
		if b, err := json.Marshal(r.Spent); err == nil {
			usage = string(b)
		}
	}
	return turnRecord{Index: index, Kind: kind, SessionID: r.SessionID, StopReason: r.StopReason, Usage: usage}
}

// agentResult is the recorded result of an agent session.
type agentResult struct {
	Text       string       `json:"text,omitempty"`
	Structured any          `json:"structured,omitempty"`
	Turns      []turnRecord `json:"turns,omitempty"`
}

// appendAgentFingerprint appends to dst the digests of what determines an
// agent's result (see Effect.Request). system is the authored system
// text, before any skill fragment (which names staging paths that differ
// from run to run); staging paths in the prompt are replaced by a
// placeholder for the same reason.
func appendAgentFingerprint(dst []byte, req *AgentRequest, system string, p AgentProvider, schema *Schema, plan *agentPlan) []byte {
	prompt := req.Prompt
	if st := plan.staging; st != nil && st.dir != "" {
		prompt = strings.ReplaceAll(prompt, st.dir, "<staging>")
	}
	// Fields in sorted order.
	b, start := dst, len(dst)
	if len(req.FollowUps) > 0 {
		b = appendField(b, start, "follow-ups", strings.Join(req.FollowUps, "\x00"))
	}
	if len(plan.mcp) > 0 {
		names := make([]string, len(plan.mcp))
		for i, m := range plan.mcp {
			names[i] = m.GrantName()
		}
		b = appendField(b, start, "mcp servers", strings.Join(names, "\x00"))
	}
	if req.Model != "" {
		b = appendField(b, start, "model", req.Model)
	}
	if req.Permissions != DefaultPermissions() {
		b = appendField(b, start, "permissions", fmt.Sprintf("%s/%t/%t", req.Permissions.Filesystem, req.Permissions.Network, req.Permissions.Shell))
	}
	b = appendField(b, start, "prompt", prompt)
	b = appendField(b, start, "provider", p.Name())
	if schema != nil {
		b = appendField(b, start, "schema", schema.JSON())
	}
	if len(plan.skills) > 0 {
		var sb strings.Builder
		for _, sk := range plan.skills {
			sb.WriteString(sk.Name)
			sb.WriteByte(0)
			sb.WriteString(sk.Description)
			sb.WriteByte(0)
		}
		b = appendField(b, start, "skills", sb.String())
	}
	if system != "" {
		b = appendField(b, start, "system", system)
	}
	if len(plan.tools) > 0 {
		var sb strings.Builder
		for _, g := range plan.tools {
			sb.WriteString(g.Tool.Name())
			sb.WriteByte(0)
			sb.WriteString(g.Tool.Description())
			sb.WriteByte(0)
			sb.WriteString(g.Tool.InputSchema().JSON())
			sb.WriteByte(0)
		}
		b = appendField(b, start, "tools", sb.String())
	}
	return b
}

// replayedAgent turns a recorded agent result back into a response, with
// what its turns spent (their recorded usage reports, summed).
func replayedAgent(rec *Effect) (*AgentResponse, Usage, error) {
	if text, ok := plainText(rec.Result); ok {
		return &AgentResponse{Text: text}, Usage{}, nil
	}
	var r agentResult
	if err := decodeJSON(rec.Result, &r); err != nil {
		return nil, Usage{}, &EvaluationError{Msg: "the journal's record of " + rec.Label + " cannot be read", Pos: rec.Pos, Err: err}
	}
	resp := &AgentResponse{Text: r.Text, Structured: r.Structured}
	var spent Usage
	for _, t := range r.Turns {
		u, err := ParseUsage(t.Usage)
		if err != nil {
			return nil, Usage{}, &EvaluationError{Msg: "the journal's record of " + rec.Label + " has a usage report that cannot be read", Pos: rec.Pos, Err: err}
		}
		spent = spent.Add(u)
	}
	if n := len(r.Turns); n > 0 {
		t := r.Turns[n-1]
		resp.SessionID, resp.StopReason, resp.Usage = t.SessionID, t.StopReason, t.Usage
	}
	return resp, spent, nil
}

// RecordedUsage returns what a journaled agent effect's session spent, as
// its turns' usage reports recorded it (the metered spend of a metered
// session), and whether the record says; other effects spent nothing.
func RecordedUsage(e *Effect) (Usage, bool) {
	if e == nil || e.Kind != "agent" {
		return Usage{}, false
	}
	_, u, err := replayedAgent(e)
	if err != nil || u.IsZero() {
		return Usage{}, false
	}
	if u.ModelCalls == 0 {
		// Unmetered turns report tokens, not calls: a turn is one.
		var r agentResult
		if decodeJSON(e.Result, &r) == nil {
			u.ModelCalls = int64(len(r.Turns))
		}
	}
	return u, true
}

// plainText reads the result {"text":"..."} whose text needs no
// unescaping, as most recorded texts are, without a JSON decoder; ok is
// false for anything else.
func plainText(b []byte) (string, bool) {
	const prefix, suffix = `{"text":"`, `"}`
	if len(b) < len(prefix)+len(suffix) || string(b[:len(prefix)]) != prefix || string(b[len(b)-len(suffix):]) != suffix {
		return "", false
	}
	body := b[len(prefix) : len(b)-len(suffix)]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// recordAgent records a live agent result that passed its checks.
func (d *domain) recordAgent(ctx context.Context, ws *wsState, e *Effect, resp *AgentResponse, structured bool, turns []turnRecord, external bool) error {
	b := make([]byte, 0, len(resp.Text)+32+48*len(turns))
	b = append(b, '{')
	if structured {
		b = append(b, `"structured":`...)
		var ok bool
		if b, ok = appendJSON(b, resp.Structured); !ok {
			s, err := CanonicalJSON(resp.Structured)
			if err != nil {
				return &EvaluationError{Msg: "cannot record " + e.Label + " in the journal", Pos: e.Pos, Err: err}
			}
			b = append(b[:len(`{"structured":`)], s...)
		}
	} else {
		b = append(b, `"text":`...)
		b = jsonstr.Append(b, resp.Text)
	}
	if len(turns) > 0 {
		b = append(b, `,"turns":[`...)
		for i, t := range turns {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(t.Index), 10)
			b = append(b, `,"kind":`...)
			b = jsonstr.Append(b, t.Kind)
			for _, f := range [...]struct{ k, v string }{{"sessionId", t.SessionID}, {"stopReason", t.StopReason}, {"usage", t.Usage}} {
				if f.v != "" {
					b = append(b, ',', '"')
					b = append(b, f.k...)
					b = append(b, '"', ':')
					b = jsonstr.Append(b, f.v)
				}
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	e.Result = append(b, '}')
	return d.recordIn(ctx, ws, e, external)
}

func inProcess(p AgentProvider) bool {
	ip, ok := p.(InProcess)
	return ok && ip.InProcess()
}
