// Package agentcancel is the cancellation test every real agent's
// end-to-end tests share: a run cancelled while the agent waits on its
// model must end every process of the session, the agent's children and
// grandchildren included.
package agentcancel

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
)

// Run starts a fake model that never answers in time and a session of the
// provider that provider makes against it, with env (a marker variable)
// added to the agent's environment. Once the model has been asked, Run
// counts the processes that carry the marker (every process the session
// started inherits it) and cancels the run; the run must fail, and no
// marked process may be left when Evaluate returns. A test in which no
// marked process was seen fails, since it would prove nothing.
func Run(t *testing.T, provider func(model *fakemodel.Server, env map[string]string) eval.AgentProvider) {
	t.Helper()
	release := make(chan struct{})
	model := fakemodel.Start(func(*fakemodel.Request) fakemodel.Reply {
		select { // a model that never answers in time
		case <-release:
		case <-time.After(time.Minute):
		}
		return fakemodel.Reply{Text: "late"}
	})
	defer model.Close()
	defer close(release)
	name := "AML_CANCEL_TEST_MARKER"
	value := strconv.FormatInt(time.Now().UnixNano(), 10)
	marker := name + "=" + value
	p := provider(model, map[string]string{name: value})
	rt, err := eval.New(eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	alive := make(chan int, 1)
	go func() {
		for len(model.Requests()) == 0 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		alive <- len(Marked(marker))
		cancel()
	}()
	start := time.Now()
	timeout := time.AfterFunc(3*time.Minute, cancel)
	defer timeout.Stop()
	if _, err := rt.Evaluate(ctx, &eval.Agent{Provider: p, Children: []any{"wait"}}); err == nil {
		t.Fatal("the cancelled run succeeded")
	}
	n := <-alive
	if n == 0 {
		t.Fatal("no process of the session was found while it ran, so the test proves nothing")
	}
	if left := Marked(marker); len(left) > 0 {
		t.Fatalf("%d of the session's %d processes outlived the cancelled run (%v after the cancel): %v", len(left), n, time.Since(start).Round(time.Millisecond), left)
	}
	t.Logf("%d processes of the session, none left after the cancel", n)
}

// Marked returns the live processes (not zombies) whose environment holds
// marker ("NAME=value"), each as "PID command line".
func Marked(marker string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
				continue
			}
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == marker {
				cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				out = append(out, fmt.Sprintf("%s %s", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " ")))
				break
			}
		}
	}
	return out
}
