package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/fsstar"
)

// companionEnv is the environment of an aml started by a companion
// test: no AML_EXEC_PATH or AML_DELEGATED of the test's own, and a PATH
// without any installed aml-full.
func companionEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "AML_EXEC_PATH" || k == delegatedEnv || k == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "PATH=/usr/bin:/bin"), extra...)
}

// runIn runs bin with args in dir and returns its stdout, stderr and
// exit code.
func runIn(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("%s %q: %v", bin, args, err)
	return "", "", 0
}

// copyExe copies the executable src to dir/name.
func copyExe(t *testing.T, src, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// dockerWorkflow is a workflow that names docker_sandbox() in a module
// it loads, with an argument the real builtin refuses.
func dockerWorkflow(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lib.star", "def box():\n    return docker_sandbox(imagee = \"alpine\")\n")
	write("main.star", "load(\"lib.star\", \"box\")\n\ndef main():\n    return \"x\"\n")
	return dir
}

// TestCompanionRunsForServices: aml runs aml-full in its place for a
// workflow that (through a loaded module) names a builtin of the
// services, so the real docker_sandbox() checks its arguments; aml doc
// describes the real builtin too.
func TestCompanionRunsForServices(t *testing.T) {
	bin := buildAML(t)
	if _, err := os.Stat(filepath.Join(filepath.Dir(bin), companionName)); err != nil {
		t.Fatalf("testbin did not place %s beside aml: %v", companionName, err)
	}
	dir := dockerWorkflow(t)
	stdout, stderr, code := runIn(t, bin, dir, companionEnv(), "check", "lib.star")
	if code != 1 || !strings.Contains(stdout, `unexpected keyword argument "imagee" (did you mean "image"?)`) {
		t.Errorf("aml check of docker_sandbox(imagee=): exit %d, stdout:\n%s\nstderr:\n%s\nwant the real builtin's complaint about imagee", code, stdout, stderr)
	}
	stdout, stderr, code = runIn(t, bin, dir, companionEnv(), "doc", "docker_sandbox")
	if code != 0 || !strings.Contains(stdout, "DOCKER_HOST") {
		t.Errorf("aml doc docker_sandbox: exit %d, stdout:\n%s\nstderr:\n%s\nwant the real reference", code, stdout, stderr)
	}
}

// TestCompanionMissing: without aml-full, a workflow that needs it
// fails before anything runs, saying what to install; aml doc describes
// the other builtins and names the missing ones; a workflow without the
// services runs.
func TestCompanionMissing(t *testing.T) {
	bin := copyExe(t, buildAML(t), t.TempDir(), "aml")
	dir := dockerWorkflow(t)
	_, stderr, code := runIn(t, bin, dir, companionEnv(), "run", "main.star")
	if code != exitUsage || !strings.Contains(stderr, "lib.star:2:12 calls docker_sandbox()") || !strings.Contains(stderr, "go install github.com/aml-go/aml/cmd/...@latest") {
		t.Errorf("aml run without %s: exit %d, stderr:\n%s", companionName, code, stderr)
	}
	stdout, _, code := runIn(t, bin, dir, companionEnv(), "doc", "docker_sandbox")
	if code != 0 || !strings.Contains(stdout, "Linked in "+companionName) {
		t.Errorf("aml doc docker_sandbox without %s: exit %d, stdout:\n%s", companionName, code, stdout)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.star"), []byte("def main():\n    return \"plain\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runIn(t, bin, dir, companionEnv(), "run", "--quiet", "plain.star")
	if code != 0 || strings.TrimSpace(stdout) != "plain" {
		t.Errorf("aml run of a plain workflow without %s: exit %d, stdout %q, stderr:\n%s", companionName, code, stdout, stderr)
	}
	_, stderr, code = runIn(t, bin, dir, companionEnv(), "sandbox", "prune")
	if code != exitUsage || !strings.Contains(stderr, "aml sandbox prune needs "+companionName) {
		t.Errorf("aml sandbox prune without %s: exit %d, stderr:\n%s", companionName, code, stderr)
	}
}

// TestCompanionExecPath: AML_EXEC_PATH names the directory of aml-full
// when it is not beside aml.
func TestCompanionExecPath(t *testing.T) {
	built := buildAML(t)
	bin := copyExe(t, built, t.TempDir(), "aml")
	dir := dockerWorkflow(t)
	stdout, stderr, code := runIn(t, bin, dir, companionEnv("AML_EXEC_PATH="+filepath.Dir(built)), "doc", "docker_sandbox")
	if code != 0 || !strings.Contains(stdout, "DOCKER_HOST") {
		t.Errorf("aml doc with AML_EXEC_PATH: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestCompanionNotLinked: an aml-full that does not link the services
// (aml copied under its name) fails instead of starting itself again.
func TestCompanionNotLinked(t *testing.T) {
	built := buildAML(t)
	tmp := t.TempDir()
	bin := copyExe(t, built, tmp, "aml")
	copyExe(t, built, tmp, companionName)
	_, stderr, code := runIn(t, bin, dockerWorkflow(t), companionEnv(), "check", "main.star")
	if code != exitUsage || !strings.Contains(stderr, "does not link the services") {
		t.Errorf("aml with a false %s: exit %d, stderr:\n%s", companionName, code, stderr)
	}
}

// TestNeedsCompanion: which invocations need the services.
func TestNeedsCompanion(t *testing.T) {
	dir := dockerWorkflow(t)
	t.Chdir(dir)
	if err := os.WriteFile("plain.star", []byte("# docker_sandbox() in a comment\ndef main():\n    return \"docker_sandbox\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("broken.star", []byte("def main(:\n    docker_sandbox()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AML_TEMPORAL_BLOB_STORE", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	for _, c := range []struct {
		cmd      string
		args     []string
		why      string // a part of the reason; "" for none
		required bool
	}{
		{"run", []string{"plain.star"}, "", true},
		{"run", []string{"--quiet", "main.star"}, "lib.star:2:12 calls docker_sandbox()", true},
		{"run", []string{"broken.star"}, "", true},
		{"test", []string{"."}, "calls docker_sandbox()", true},
		{"check", []string{"plain.star", "main.star"}, "lib.star:2:12", true},
		{"check", []string{"plain.star"}, "the lint of aml check", true},
		{"check", []string{"--no-lint", "plain.star"}, "", true},
		{"check", []string{"--no-lint", "main.star"}, "lib.star:2:12", true},
		{"graph", []string{"main.star", "-o", "x.svg"}, "lib.star", true},
		{"fmt", []string{"main.star"}, "", false},
		{"sandbox", []string{"prune"}, "aml sandbox", true},
		{"worker", nil, "aml worker", true},
		{"doc", nil, "aml doc", false},
		{"lsp", nil, "aml lsp", false},
		{"workspace", []string{"verify", "s3://b"}, "aml workspace verify", true},
		{"workspace", []string{"check", "s3://b/p"}, "s3://b/p", true},
		{"workspace", []string{"check", "store"}, "", false},
		{"run", []string{"--temporal", "h:1", "--blob-store=s3://b", "plain.star"}, "s3://b", true},
		{"version", nil, "", false},
		{"worker", []string{"--help"}, "", false},
		{"cancel", []string{"-h"}, "", false},
		{"run", []string{"--temporal", "h:1", "-h"}, "", false},
		{"run", []string{"--temporal", "h:1", "plain.star"}, "aml run --temporal", true},
		{"run", []string{"--temporal=h:1", "plain.star"}, "aml run --temporal", true},
		{"runs", []string{"show", "r1", "-temporal", "h:1"}, "aml runs --temporal", true},
		{"runs", []string{"--journal", "runs"}, "", false},
		{"cancel", []string{"r1"}, "aml cancel r1", true},
		{"run", []string{"--otlp-endpoint", "http://c:4318", "plain.star"}, "--otlp-endpoint", true},
		{"resume", []string{"r1", "--journal", "runs", "--otlp-endpoint=http://c:4318"}, "--otlp-endpoint", true},
		{"answer", []string{"r1", "q=1"}, "aml answer r1", true},
	} {
		why, required := needsCompanion(c.cmd, c.args)
		if c.why == "" && why != "" || c.why != "" && (!strings.Contains(why, c.why) || required != c.required) {
			t.Errorf("needsCompanion(%s %q) = %q, %v; want %q, %v", c.cmd, c.args, why, required, c.why, c.required)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")
	if why, _ := needsCompanion("run", []string{"plain.star"}); !strings.Contains(why, "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("aml run with OTEL_EXPORTER_OTLP_ENDPOINT: %q", why)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("AML_TEMPORAL_BLOB_STORE", "s3://blobs")
	if why, _ := needsCompanion("runs", []string{"--journal", "runs"}); !strings.Contains(why, "AML_TEMPORAL_BLOB_STORE") {
		t.Errorf("aml runs with an s3 blob store: %q", why)
	}
	if why, _ := needsCompanion("fmt", []string{"main.star"}); why != "" {
		t.Errorf("aml fmt with an s3 blob store: %q", why)
	}
}

// TestStandInsNameEveryBuiltin: the stand-ins of a build without the
// services are the builtins the services add.
func TestStandInsNameEveryBuiltin(t *testing.T) {
	var names []string
	for _, b := range standIns().Builtins {
		names = append(names, b.Name)
	}
	if strings.Join(names, " ") != strings.Join(services.Builtins, " ") {
		t.Errorf("stand-ins %q, services %q", names, services.Builtins)
	}
}

// TestCompanionDoc: the reference's section on the companion names
// every builtin and command that runs it.
func TestCompanionDoc(t *testing.T) {
	for _, n := range services.Builtins {
		if !strings.Contains(companionDoc, "`"+n+"`") {
			t.Errorf("the companion's section does not name %s", n)
		}
	}
	for c := range alwaysCompanion {
		if !strings.Contains(companionDoc, "`aml "+c) {
			t.Errorf("the companion's section does not name aml %s", c)
		}
	}
}

// TestScanAgreesWithLoad holds the scan that sends a workflow to
// aml-full to what the workflows of the repository do: every .star file
// whose load (the top level, with its modules) reaches a builtin of the
// services in a build without them is one the scan sends, and every
// file the scan sends names one.
func TestScanAgreesWithLoad(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, dir := range []string{"examples", "testdata", "lsp/testdata", "starlib/testdata", "internal/cli/testdata"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".star") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 300 {
		t.Fatalf("found %d workflow files; the corpus has more than 300", len(files))
	}
	light := []*starlib.Extension{acpstar.New(acpstar.Options{}), fsstar.Extension, standIns()}
	var sent, reached int
	for _, f := range files {
		why := scanForServices([]string{f})
		_, err := starlib.LoadFile(f, starlib.LoadOptions{Print: func(string) {}, Extensions: light})
		needs := err != nil && strings.Contains(err.Error(), "needs "+companionName)
		if needs {
			reached++
		}
		if why != "" {
			sent++
		}
		switch {
		case needs && why == "":
			t.Errorf("%s reaches a builtin of the services when loaded, and the scan does not send it to %s: %v", f, companionName, err)
		case why != "" && !strings.Contains(why, "calls "):
			t.Errorf("%s: the scan's reason %q does not name the call", f, why)
		}
	}
	if reached == 0 || sent < reached {
		t.Errorf("of %d files, %d reach a builtin of the services and the scan sends %d", len(files), reached, sent)
	}
	t.Logf("%d workflow files: %d reach a builtin of the services when loaded, the scan sends %d", len(files), reached, sent)
}

// BenchmarkScanForServices is the cost aml pays before every run, test
// or check: the scan of the examples.
func BenchmarkScanForServices(b *testing.B) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.star"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no examples: %v", err)
	}
	for b.Loop() {
		for _, p := range paths {
			scanForServices([]string{p})
		}
	}
	b.ReportMetric(float64(len(paths)), "files/op")
}
