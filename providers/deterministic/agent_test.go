package deterministic_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

func TestEchoRecordsCalls(t *testing.T) {
	a, err := deterministic.New(deterministic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "deterministic" {
		t.Fatalf("name %q", a.Name())
	}
	req := &eval.AgentRequest{Prompt: "hello", FollowUps: []string{"again"}, System: "sys"}
	resp, err := a.Run(context.Background(), req, &eval.AgentExecution{RunID: "r"})
	if err != nil || resp.Text != "hello" {
		t.Fatalf("%+v %v", resp, err)
	}
	req.FollowUps[0] = "mutated"
	calls := a.Calls()
	if len(calls) != 1 || calls[0].Index != 0 || calls[0].Request.FollowUps[0] != "again" || calls[0].Exec.RunID != "r" {
		t.Fatalf("calls %+v", calls)
	}
	a.Reset()
	if len(a.Calls()) != 0 {
		t.Fatal("Reset kept calls")
	}
}

func TestRespondAndCallIndex(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	a, _ := deterministic.New(deterministic.Options{Name: "r", Respond: func(_ context.Context, req *eval.AgentRequest, i int) (*eval.AgentResponse, error) {
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		if req.Prompt == "fail" {
			return nil, errors.New("refused")
		}
		return &eval.AgentResponse{Text: strings.ToUpper(req.Prompt)}, nil
	}})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(seen) != 20 || len(a.Calls()) != 20 {
		t.Fatalf("indexes %v, calls %d", seen, len(a.Calls()))
	}
	if _, err := a.Run(context.Background(), &eval.AgentRequest{Prompt: "fail"}, nil); err == nil || err.Error() != "refused" {
		t.Fatalf("error %v", err)
	}
}

func TestPreCancelledAndNames(t *testing.T) {
	a, _ := deterministic.New(deterministic.Options{})
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stopped")
	cancel(cause)
	if _, err := a.Run(ctx, &eval.AgentRequest{Prompt: "x"}, nil); !errors.Is(err, cause) {
		t.Fatalf("want the cancellation cause, got %v", err)
	}
	if len(a.Calls()) != 0 {
		t.Fatal("a pre-cancelled call was recorded")
	}
	for _, bad := range []string{" x", "x ", "a\x00b"} {
		if _, err := deterministic.New(deterministic.Options{Name: bad}); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	nilResp, _ := deterministic.New(deterministic.Options{Respond: func(context.Context, *eval.AgentRequest, int) (*eval.AgentResponse, error) { return nil, nil }})
	if _, err := nilResp.Run(context.Background(), &eval.AgentRequest{}, nil); err == nil {
		t.Fatal("a nil response must be an error")
	}
}

// TestCallsRoundTrip: a call that carries only a prompt (stored compactly)
// and a call that carries more (stored whole) both come back from Calls
// as they were sent, in order.
func TestCallsRoundTrip(t *testing.T) {
	a, _ := deterministic.New(deterministic.Options{})
	plain := eval.AgentRequest{Prompt: "p", Permissions: eval.DefaultPermissions(), ToolServer: "aml"}
	plainExec := eval.AgentExecution{RunID: "r", Source: eval.Position{File: "w.star", Line: 3, Col: 5}}
	rich := eval.AgentRequest{Prompt: "q", System: "s", Model: "m", Name: "n", FollowUps: []string{"f"}, Permissions: eval.Permissions{Filesystem: eval.ReadOnly}}
	richExec := eval.AgentExecution{RunID: "r", SpanID: "span", ParentSpanID: "parent", Source: eval.Position{File: "w.star", Line: 4, Col: 1}}
	for _, c := range []struct {
		req  eval.AgentRequest
		exec eval.AgentExecution
	}{{plain, plainExec}, {rich, richExec}, {plain, plainExec}} {
		if _, err := a.Run(context.Background(), &c.req, &c.exec); err != nil {
			t.Fatal(err)
		}
	}
	calls := a.Calls()
	want := []struct {
		req  eval.AgentRequest
		exec eval.AgentExecution
	}{{plain, plainExec}, {rich, richExec}, {plain, plainExec}}
	if len(calls) != len(want) {
		t.Fatalf("%d calls", len(calls))
	}
	for i, c := range calls {
		w := want[i]
		if c.Index != i || c.Request.Prompt != w.req.Prompt || c.Request.System != w.req.System || c.Request.Model != w.req.Model ||
			c.Request.Name != w.req.Name || c.Request.Permissions != w.req.Permissions || c.Request.ToolServer != w.req.ToolServer ||
			strings.Join(c.Request.FollowUps, "|") != strings.Join(w.req.FollowUps, "|") || c.Exec != w.exec {
			t.Errorf("call %d: %+v %+v, want %+v %+v", i, c.Request, c.Exec, w.req, w.exec)
		}
	}
}
