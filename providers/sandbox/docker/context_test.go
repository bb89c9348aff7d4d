package docker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestContexts: without DOCKER_HOST the docker CLI's selected context
// names the engine (DOCKER_CONTEXT, else config.json's currentContext);
// the default context and no configuration mean the local socket.
func TestContexts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONTEXT", "")
	writeContext := func(name, host string) {
		sum := sha256.Sum256([]byte(name))
		meta := filepath.Join(dir, "contexts", "meta", hex.EncodeToString(sum[:]))
		if err := os.MkdirAll(meta, 0o755); err != nil {
			t.Fatal(err)
		}
		data := `{"Name":"` + name + `","Metadata":{},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
		if err := os.WriteFile(filepath.Join(meta, "meta.json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeContext("remote", "tcp://engine.example:2375")
	writeContext("other", "unix:///run/other.sock")
	host := func() string {
		t.Helper()
		c, err := docker.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.DaemonHost()
	}
	if got := host(); got != "unix:///var/run/docker.sock" {
		t.Errorf("no configuration: %s, want the local socket", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"currentContext": "remote"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := host(); got != "tcp://engine.example:2375" {
		t.Errorf("currentContext remote: %s", got)
	}
	t.Setenv("DOCKER_CONTEXT", "other")
	if got := host(); got != "unix:///run/other.sock" {
		t.Errorf("DOCKER_CONTEXT other: %s", got)
	}
	t.Setenv("DOCKER_HOST", "unix:///run/explicit.sock")
	if got := host(); got != "unix:///run/explicit.sock" {
		t.Errorf("DOCKER_HOST wins: %s", got)
	}
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONTEXT", "gone")
	if _, err := docker.NewClient(); err == nil || !strings.Contains(err.Error(), `the docker context "gone" is selected but cannot be read`) {
		t.Errorf("a missing context: %v", err)
	}
}

// TestNoDaemon: with no engine at the address, acquisition fails saying
// what to check, and nothing is left on the host.
func TestNoDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	p, err := docker.New(docker.Options{Image: "aml-test/busybox:1"})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err = p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "r",
		Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "is the Docker daemon running, and does DOCKER_HOST point at it?") {
		t.Fatalf("Acquire with no engine: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "aml-*")); len(left) > 0 {
		t.Errorf("left on the host: %v", left)
	}
}
