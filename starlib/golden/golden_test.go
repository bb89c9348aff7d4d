package golden

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

// write creates the files of a test tree under dir.
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseDirectives(t *testing.T) {
	d, err := ParseDirectives([]byte("# rule\n# env: A=1\n#env: B = x=y\n\n# env: C=\n# test: no-default-agent\n# test: local-providers\nx = 1\n# env: D=late\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "x=y", "C": ""}
	if !reflect.DeepEqual(d.Env, want) || !d.NoDefaultAgent || !d.LocalProviders {
		t.Errorf("got %q (no default agent %v, local providers %v), want %q and true", d.Env, d.NoDefaultAgent, d.LocalProviders, want)
	}
	for _, bad := range []string{"# env: novalue\n", "# env: =v\n", "# test: no-default\n", "# test: local\n"} {
		if _, err := ParseDirectives([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"a_test.star":         "",
		"b.star":              "",
		"b.golden":            "",
		"lib.star":            "",
		"sub/c_test.star":     "",
		"sub/deep/d.star":     "",
		"sub/deep/d.golden":   "",
		".hidden/e_test.star": "",
		"notes.txt":           "",
	})
	tests, err := Find([]string{dir, filepath.Join(dir, "a_test.star"), filepath.Join(dir, "sub") + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tt := range tests {
		got = append(got, tt.Name+" "+strings.TrimPrefix(tt.Path, filepath.ToSlash(dir)+"/"))
		if want := strings.TrimSuffix(tt.File, ".star") + ".golden"; tt.Golden != want {
			t.Errorf("%s: golden %s, want %s", tt.Name, tt.Golden, want)
		}
	}
	// Every file once, in path order: the later arguments add nothing.
	want := []string{"a_test a_test", "b b", "sub/c_test sub/c_test", "sub/deep/d sub/deep/d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	tests, err = Find([]string{filepath.Join(dir, "sub"), filepath.Join(dir, "lib.star")})
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, tt := range tests {
		got = append(got, tt.Name)
	}
	if want := []string{"c_test", "deep/d", "lib"}; !reflect.DeepEqual(got, want) {
		t.Errorf("names relative to their argument: got %q, want %q", got, want)
	}

	if _, err := Find([]string{filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "missing: no such file") {
		t.Errorf("missing path: %v", err)
	}
	if _, err := Find([]string{filepath.Join(dir, "notes.txt")}); err == nil || !strings.Contains(err.Error(), "not a directory or a .star file") {
		t.Errorf("non-.star file: %v", err)
	}
}

// fakeProvider stands for a real provider: it must never run in test mode.
type fakeProvider struct {
	ran bool
}

func (p *fakeProvider) Name() string { return "codex" }
func (p *fakeProvider) Run(context.Context, *eval.AgentRequest, *eval.AgentExecution) (*eval.AgentResponse, error) {
	p.ran = true
	return &eval.AgentResponse{Text: "real"}, nil
}
func (p *fakeProvider) NativeSkillDiscovery() bool                { return true }
func (p *fakeProvider) RequiresObjectToolInput() bool             { return true }
func (p *fakeProvider) SupportsSandbox(*eval.SandboxSession) bool { return true }

func TestOverrideReplacesRealProviders(t *testing.T) {
	h := &harness{}
	if h.override(nil) != nil {
		t.Error("no provider must stay no provider")
	}

	real := &fakeProvider{}
	p := h.override(real)
	r, ok := p.(*recorder)
	if !ok {
		t.Fatalf("override returned %T, want *recorder", p)
	}
	if _, ok := r.inner.(*twin); !ok {
		t.Fatalf("a real provider was wrapped as %T, want its twin", r.inner)
	}
	if p.Name() != "codex" || !r.NativeSkillDiscovery() || !r.RequiresObjectToolInput() || !r.SupportsSandbox(&eval.SandboxSession{}) {
		t.Errorf("twin %q does not keep the original's name and capabilities", p.Name())
	}
	resp, err := p.Run(t.Context(), &eval.AgentRequest{Prompt: "Review.", Permissions: eval.DefaultPermissions()}, &eval.AgentExecution{Source: eval.Position{File: "x.star", Line: 3, Col: 9}})
	if err != nil || resp.Text != "Review." {
		t.Fatalf("twin answered %v, %v; want the echoed prompt", resp, err)
	}
	if real.ran {
		t.Error("the real provider ran")
	}

	fixture, err := deterministic.New(deterministic.Options{Name: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	p = h.override(fixture)
	if r := p.(*recorder); r.inner != eval.AgentProvider(fixture) || r.NativeSkillDiscovery() || r.RequiresObjectToolInput() {
		t.Errorf("a deterministic provider must be kept as is, got %T", r.inner)
	}
	if _, err := p.Run(t.Context(), &eval.AgentRequest{Prompt: "Again.", Permissions: eval.DefaultPermissions()}, &eval.AgentExecution{Source: eval.Position{File: "x.star", Line: 2, Col: 1}}); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Calls()) != 1 {
		t.Error("the kept provider did not run")
	}

	got := string(h.render("/nowhere", "done", nil))
	want := Header + `-- result --
|done
-- agents --
x.star:2:1 provider=fixture
  prompt: Again.
  result: Again.
x.star:3:9 provider=codex
  prompt: Review.
  result: Review.
`
	if got != want {
		t.Errorf("record:\n%s\nwant:\n%s", got, want)
	}
}

func TestRecordDefaultProviderAndPaths(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"sub/x_test.star": `# env: WHO=tester
def main():
    print("dir is", DIR)
    return agent("Hello ", env("WHO"), model = "m", permissions = {"filesystem": "read-only", "network": False, "shell": False})
DIR = "` + filepath.Join(dir, "sub") + `"
`,
	})
	got, err := Record(t.Context(), filepath.Join(dir, "sub", "x_test.star"))
	if err != nil {
		t.Fatal(err)
	}
	want := Header + `-- result --
|Hello tester
-- print --
dir is .
-- agents --
x_test.star:4:17 provider=deterministic model=m
  prompt: Hello tester
  permissions: filesystem=read-only network=false shell=false
  result: Hello tester
`
	if string(got) != want {
		t.Errorf("record:\n%s\nwant:\n%s", got, want)
	}
}

// TestLocalProviders checks that "# test: local-providers" keeps
// local_sandbox() and local_workspace(): the command really runs and the
// file is really read, from a directory relative to the test file, while
// without the directive both are twins that run and read nothing.
func TestLocalProviders(t *testing.T) {
	dir := t.TempDir()
	body := `configure(sandbox_provider = local_sandbox(), workspace_provider = local_workspace(directory = "notes"))

def main():
    return workspace(sandbox(script("cat note.txt | tr a-z A-Z", shell = "sh"), access = "read-write"))
`
	write(t, dir, map[string]string{
		"sub/notes/note.txt": "kept\n",
		"sub/kept_test.star": "# test: local-providers\n" + body,
		"sub/twin_test.star": body,
	})
	kept, err := Record(t.Context(), filepath.Join(dir, "sub", "kept_test.star"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kept), "-- result --\n|KEPT\n") {
		t.Errorf("with the directive the sandbox must run the command in the workspace directory:\n%s", kept)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "notes.lock")); !os.IsNotExist(err) {
		t.Errorf("the workspace lock must be released: %v", err)
	}
	twin, err := Record(t.Context(), filepath.Join(dir, "sub", "twin_test.star"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(twin), "KEPT") || !strings.Contains(string(twin), "-- effects --") {
		t.Errorf("without the directive the sandbox must be a twin that runs nothing:\n%s", twin)
	}
}

func TestRunOutput(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"a_test.star": "def main():\n    return agent(\"a\")\n",
		"b_test.star": "def main():\n    return \"b\"\n",
		"c.star":      "def main():\n    return \"c\"\n",
		"c.golden":    Header + "-- result --\n|old\n",
	})
	var out bytes.Buffer
	sum, err := Run(Options{Paths: []string{dir}, Update: true, Run: "^[ab]", Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if sum != (Summary{Passed: 2, Updated: 2}) {
		t.Errorf("update summary %+v", sum)
	}
	if !strings.HasSuffix(out.String(), "\n2 passed, 0 failed\n") || strings.Count(out.String(), "[updated]") != 2 {
		t.Errorf("update output:\n%s", out.String())
	}

	out.Reset()
	sum, err = Run(Options{Paths: []string{dir}, Out: &out, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum != (Summary{Passed: 2, Failed: 1}) {
		t.Errorf("summary %+v", sum)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	d := filepath.ToSlash(dir)
	for i, prefix := range []string{"ok   " + d + "/a_test (", "ok   " + d + "/b_test (", "FAIL " + d + "/c", "diff "} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], prefix) {
			t.Fatalf("line %d does not start with %q:\n%s", i, prefix, out.String())
		}
	}
	if !strings.Contains(out.String(), "\n-|old\n+|c\n") || lines[len(lines)-1] != "2 passed, 1 failed" {
		t.Errorf("output:\n%s", out.String())
	}

	if _, err := Run(Options{Paths: []string{dir}, Run: "zzz"}); !errors.Is(err, ErrNoTests) {
		t.Errorf("no match: %v", err)
	}
	if _, err := Run(Options{Paths: []string{filepath.Join(dir, "empty")}}); err == nil || errors.Is(err, ErrNoTests) {
		t.Errorf("missing path: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(Options{Paths: []string{filepath.Join(dir, "empty")}}); !errors.Is(err, ErrNoTests) {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := Run(Options{Paths: []string{dir}, Run: "("}); err == nil || errors.Is(err, ErrNoTests) {
		t.Errorf("bad -run: %v", err)
	}
}

func TestCheckCutShortNeverWrites(t *testing.T) {
	dir := t.TempDir()
	// The test marks (with a host script) that it is past its start, then
	// loops for hours unless cut short.
	write(t, dir, map[string]string{
		"slow_test.star": "def main():\n    evaluate(script(command = \"touch\", args = [\"started\"]))\n    n = 0\n    for i in range(1 << 40):\n        n += i\n    return str(n)\n",
	})
	tests, err := Find([]string{dir})
	if err != nil || len(tests) != 1 {
		t.Fatalf("%v, %v", tests, err)
	}
	// The timeout holds whatever phase (load, script, loop) it cuts.
	res := Check(t.Context(), tests[0], true, 50*time.Millisecond)
	if res.OK || !strings.Contains(res.Detail, "timed out after 50ms") {
		t.Errorf("timeout: %+v", res)
	}
	// The cancellation comes once the test is running: when its marker
	// appears (polling within a generous bound), not after a fixed delay.
	started := filepath.Join(dir, "started")
	if err := os.Remove(started); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	checked, seen := make(chan struct{}), make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := os.Stat(started); err == nil {
				seen <- true
				break
			}
			select {
			case <-checked:
				seen <- false
				return
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				seen <- false
				break
			}
		}
		cancel(fmt.Errorf("stop"))
	}()
	res = Check(ctx, tests[0], true, 0)
	close(checked)
	if !<-seen {
		t.Fatalf("the test ended or hung without starting: %+v", res)
	}
	if res.OK || !strings.Contains(res.Detail, "interrupted: stop") {
		t.Errorf("cancel: %+v", res)
	}
	if _, err := os.Stat(tests[0].Golden); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cut-short run wrote its golden file: %v", err)
	}
}

// A print() that looks like a section header is output, not structure: a
// run that succeeds never counts as expecting an error, and one that fails
// always does, whatever it printed.
func TestPrintedHeaderIsNotAnError(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"fine_test.star":   "def main():\n    print(\"-- error --\")\n    print(\"not really\\n-- error --\\nstill not\")\n    return \"fine\"\n",
		"failed_test.star": "def main():\n    print(\"-- result --\")\n    print(\"|fine\")\n    fail(\"boom\")\n",
	})
	for _, update := range []bool{true, false} {
		var out bytes.Buffer
		sum, err := Run(Options{Paths: []string{dir}, Update: update, Out: &out, Parallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := Summary{Passed: 2, Errors: 1}
		if update {
			want.Updated, want.NewErrors = 2, 1
		}
		if sum != want {
			t.Errorf("update=%v: summary %+v, want %+v\n%s", update, sum, want, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "fine_test") && strings.Contains(line, "error") {
				t.Errorf("update=%v: a passing run is marked as failing: %s", update, line)
			}
			if strings.Contains(line, "failed_test") && !strings.Contains(line, "error") {
				t.Errorf("update=%v: a failing run is not marked: %s", update, line)
			}
		}
	}
	for _, tc := range []struct {
		record string
		want   bool
	}{
		{Header + "-- result --\n|x\n-- print --\n-- error --\nboom\n", false},
		{Header + "-- print --\n-- result --\n|x\n-- error --\nboom\n", true},
		{Header + "-- error --\nboom\n", true},
		{Header + "-- print --\n-- error --\n-- error --\nboom\n", true},
		{"", false},
		{Header, false},
	} {
		if got := recordsError([]byte(tc.record)); got != tc.want {
			t.Errorf("recordsError(%q) = %v, want %v", tc.record, got, tc.want)
		}
	}
}

// TestCRLFGolden: a golden whose line endings a checkout turned into
// CRLF (git's core.autocrlf) passes; one that differs by more fails, and
// its detail says that the golden has CRLF line endings.
func TestCRLFGolden(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"w_test.star": "def main():\n    print(\"a\")\n    return \"fine\"\n"})
	if _, err := Run(Options{Paths: []string{dir}, Update: true, Out: io.Discard, Parallel: 1}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(dir, "w_test.golden")
	lf, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	crlf := bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))
	for _, c := range []struct {
		golden []byte
		passed int
		detail string
	}{
		{crlf, 1, ""},
		{bytes.Replace(crlf, []byte("fine"), []byte("fin"), 1), 0, "the golden has CRLF line endings"},
	} {
		if err := os.WriteFile(golden, c.golden, 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		sum, err := Run(Options{Paths: []string{dir}, Out: &out, Parallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Passed != c.passed || !strings.Contains(out.String(), c.detail) {
			t.Errorf("golden %q: %+v\n%s", c.golden, sum, out.String())
		}
	}
	// A record that holds a carriage return of its own is compared as it
	// is: the golden's line endings could hide a difference in it.
	if crlfOnly([]byte("a\r\nb\n"), []byte("a\r\nb\r\n")) || crlfOnly([]byte("a\rb\n"), []byte("a\rb\r\n")) {
		t.Error("a record with a carriage return was compared modulo line endings")
	}
	if !crlfOnly([]byte("a\nb\n"), []byte("a\r\nb\r\n")) {
		t.Error("a CRLF copy of a record is not recognized")
	}
}
