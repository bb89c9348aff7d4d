package hostexectest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// Mkdir makes dir and its parents, failing t on error.
func Mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// WriteHost writes content to the host file name, making its parents,
// failing t on error.
func WriteHost(t testing.TB, name, content string) {
	t.Helper()
	Mkdir(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Symlink makes the symbolic link name to target, failing t on error.
func Symlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// ReadHost returns the content of the host file name, failing t on
// error.
func ReadHost(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// WantErr fails t unless err is an error whose text contains substr.
func WantErr(t testing.TB, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not contain %q", err, substr)
	}
}

// Exec runs command with args in rt with opts and returns its result,
// failing t when it cannot run.
func Exec(t testing.TB, rt eval.SandboxRuntime, opts eval.ExecOptions, command string, args ...string) *eval.ExecResult {
	t.Helper()
	res, err := rt.Exec(context.Background(), command, args, opts)
	if err != nil {
		t.Fatalf("Exec %s %q: %v", command, args, err)
	}
	return res
}
