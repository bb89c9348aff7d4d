package acp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

// TestHandshakeBound: an agent that never answers initialize, or answers
// only with lines that are not ACP, fails after the handshake bound with
// the step and what it printed, and leaves no process behind.
func TestHandshakeBound(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc to find leftover processes (Linux)")
	}
	for _, c := range []struct{ mode, printed string }{
		{"mute", "stderr: fake agent: thinking..."},
		{"babble", "Welcome to the fake agent!"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			cmd, env := acptest.Command()
			env["AML_FAKE_ACP_MODE"] = c.mode
			mark := randomMark()
			env["AML_TEST_MARK"] = mark
			// The bound leaves the fake room to start and print (a -race
			// test binary on a loaded machine takes a good part of a
			// second) before it is found not to answer.
			p, err := acp.New(acp.Config{Command: cmd, Env: env, HandshakeTimeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangBound)
			defer cancel()
			_, err = p.Run(ctx, &eval.AgentRequest{Prompt: "x"}, nil)
			if err == nil || !strings.Contains(err.Error(), "did not answer initialize within 3s") || !strings.Contains(err.Error(), c.printed) {
				t.Fatalf("error = %v", err)
			}
			if pids := marked(mark); len(pids) > 0 {
				t.Fatalf("processes %v of the agent outlived the failed handshake", pids)
			}
		})
	}
	// The default applies when none is set.
	if acp.DefaultHandshakeTimeout != time.Minute {
		t.Fatalf("DefaultHandshakeTimeout = %s", acp.DefaultHandshakeTimeout)
	}
}

func randomMark() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// marked lists the live processes whose environment holds
// AML_TEST_MARK=mark.
func marked(mark string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(b), "AML_TEST_MARK="+mark) {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
