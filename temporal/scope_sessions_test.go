package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/sizetest"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/temporal"
)

// runLeases runs the workflow file at path in the SDK's test environment
// (a session worker) and returns its text and the leases the worker still
// holds afterwards.
func runLeases(t *testing.T, path string, opts temporal.Options) (string, int, error) {
	t.Helper()
	b, err := temporal.Pack(path)
	if err != nil {
		t.Fatal(err)
	}
	env, leases := testEnvLeases(opts)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return "", leases.Len(), err
	}
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res.Text, leases.Len(), nil
}

// TestSandboxExampleOnTemporal: examples/sandbox.star (a workspace, a
// read-write local sandbox in it, file(), a shell script, include(path=)
// of what the script wrote, an agent inside the sandbox and a nested
// sandbox view) gives on Temporal the text it gives in process, with
// every lease released.
func TestSandboxExampleOnTemporal(t *testing.T) {
	path := filepath.Join("..", "examples", "sandbox.star")
	want, err := inProcess(t, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, held, err := runLeases(t, path, temporal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("examples/sandbox.star on Temporal:\n%s\nin process:\n%s", got, want)
	}
	if held != 0 {
		t.Fatalf("%d leases still held after the run", held)
	}
}

const workspaceFlow = `configure(workspace_provider = local_workspace(directory = %q))

def main():
    return workspace(
        file("hello from the run\n", path = "out/note.txt"),
        include(path = "seed.txt", title = False),
        script(command = "pwd"),
        id = "notes",
    )
`

// TestWorkspaceOnTemporal: a workspace outside any sandbox is acquired
// on a worker: file() writes land in its directory there, include(path=)
// reads from it, and script() outside a sandbox runs in a private
// directory of the worker that is removed with the run; checkpoints go to
// the checkpoint store.
func TestWorkspaceOnTemporal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "seed.txt"), []byte("seeded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ws.star")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(workspaceFlow, "%q", `"`+dir+`"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	store := persist.NewMemoryStorage()
	got, held, err := runLeases(t, path, temporal.Options{Checkpoints: store})
	if err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("%d leases still held after the run", held)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out", "note.txt"))
	if err != nil || string(data) != "hello from the run\n" {
		t.Fatalf("file() in the workspace: %q, %v", data, err)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 || lines[0] != "seeded" || !strings.Contains(lines[1], "aml-host-") {
		t.Fatalf("result %q: want the seed file's text and the host script's private directory", got)
	}
	if _, err := os.Stat(lines[1]); !os.IsNotExist(err) {
		t.Fatalf("the host script's directory %s outlived the run: %v", lines[1], err)
	}
	if len(store.Paths(temporal.BlobNamespace)) == 0 {
		t.Fatal("file() in the workspace took no checkpoint")
	}
}

// sandboxAgent is a Go agent provider of a worker that works in its
// sandbox: it answers with what `cat` prints of the file its prompt names,
// read through the sandbox's runtime.
type sandboxAgent struct{}

func (sandboxAgent) Name() string                              { return "sandboxed" }
func (sandboxAgent) SupportsSandbox(*eval.SandboxSession) bool { return true }
func (sandboxAgent) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	if exec.Sandbox == nil {
		return nil, errors.New("no sandbox")
	}
	r, err := exec.Sandbox.Runtime.Exec(ctx, "cat", []string{req.Prompt}, eval.ExecOptions{Cwd: exec.Sandbox.Cwd})
	if err != nil {
		return nil, err
	}
	if err := exec.Sandbox.Runtime.WriteFile(ctx, "agent.txt", []byte("the agent was here\n")); err != nil {
		return nil, err
	}
	return &eval.AgentResponse{Text: fmt.Sprintf("[%s in %s: %s]", exec.Sandbox.Access, exec.Sandbox.Cwd, strings.TrimSpace(string(r.Stdout)))}, nil
}

const sandboxAgentFlow = `configure(sandbox_provider = local_sandbox(), workspace_provider = deterministic_workspace())

def main():
    return workspace(
        sandbox(
            script("mkdir -p sub && echo from-the-script > sub/made.txt", shell = "sh"),
            agent("made.txt", cwd = "sub"),
            include(path = "agent.txt", title = False),
            access = "read-write",
        ),
    )
`

// TestSandboxedAgentOnTemporal: an agent inside a sandbox() runs, as an
// activity, on the worker that holds the sandbox, with the sandbox's
// runtime and the agent's view of it (access, cwd), and sees what a script
// of the same scope wrote; what it writes is seen by the next effect.
func TestSandboxedAgentOnTemporal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sb.star")
	if err := os.WriteFile(path, []byte(sandboxAgentFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, path, sandboxAgent{})
	if err != nil {
		t.Fatal(err)
	}
	got, held, err := runLeases(t, path, temporal.Options{DefaultAgent: sandboxAgent{}, Checkpoints: persist.NewMemoryStorage()})
	if err != nil {
		t.Fatal(err)
	}
	if got != want || !strings.Contains(got, "[read-write in sub: from-the-script]") || !strings.Contains(got, "the agent was here") {
		t.Fatalf("on Temporal:\n%s\nin process:\n%s", got, want)
	}
	if held != 0 {
		t.Fatalf("%d leases still held after the run", held)
	}
}

const appFilesFlow = `configure(workspace_provider = deterministic_workspace())

def main():
    name = "notes" + ".txt"
    return [
        include(src = "docs/brief.md", title = False),
        workspace(file(src = "docs/brief.md", path = "copy.md"), include(path = "copy.md", title = False)),
        include(src = name, title = False),
    ]
`

// TestAppFilesOnTemporal: the application files that file(src=) and
// include(src=) name with a string literal travel in the bundle and are
// read from it on Temporal, as aml run reads them from the working
// directory; one named by a computed string is refused with an error that
// says why, instead of being read from whatever directory the worker has.
func TestAppFilesOnTemporal(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("docs", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"docs/brief.md": "the brief\n", "notes.txt": "notes\n", "flow.star": appFilesFlow} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := temporal.Pack("flow.star")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Data) != 1 || b.Data[0].Path != "docs/brief.md" || string(b.Data[0].Data) != "the brief\n" {
		t.Fatalf("packed application files %+v, want docs/brief.md alone", b.Data)
	}
	want, err := inProcess(t, "flow.star", nil)
	if err != nil || want != "the brief\nthe brief\nnotes\n" {
		t.Fatalf("in process: %q, %v", want, err)
	}
	_, _, err = runLeases(t, "flow.star", temporal.Options{})
	if err == nil || !strings.Contains(err.Error(), `flow.star:8:16: include(src="notes.txt")`) || !strings.Contains(err.Error(), "string literal") {
		t.Fatalf("a computed src= on Temporal: %v", err)
	}
	// Without the computed one, the run gives the text aml run gives.
	if err := os.WriteFile("flow.star", []byte(strings.Replace(appFilesFlow, "include(src = name, title = False),", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	got, held, err := runLeases(t, "flow.star", temporal.Options{})
	if err != nil || got != "the brief\nthe brief\n" || held != 0 {
		t.Fatalf("on Temporal: %q, %d leases held, %v", got, held, err)
	}
}

// runContinued runs the bundle of the workflow file at path in the SDK's
// test environment, following every continue-as-new with a new
// execution of the input it carries (as the server does), and returns
// the text, the number of executions, and the error of the last.
func runContinued(t *testing.T, path string, opts temporal.Options, after int, edit func(*temporal.RunInput)) (string, int, error) {
	t.Helper()
	b, err := temporal.Pack(path)
	if err != nil {
		t.Fatal(err)
	}
	in := temporal.RunInput{Bundle: b, ContinueAfter: after}
	for n := 1; ; n++ {
		if n > 200 {
			t.Fatal("the run never ended")
		}
		env, leases := testEnvLeases(opts)
		env.ExecuteWorkflow(temporal.WorkflowName, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("an execution did not complete")
		}
		if held := leases.Len(); held != 0 {
			t.Fatalf("execution %d left %d leases held", n, held)
		}
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			var next temporal.RunInput
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			if next.Continued == nil || next.Continued.Executions != n {
				t.Fatalf("execution %d continued with %+v", n, next.Continued)
			}
			if edit != nil {
				edit(&next)
			}
			in = next
			continue
		}
		if err != nil {
			return "", n, err
		}
		var res temporal.RunResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return res.Text, n, nil
	}
}

const longFlow = `configure(max_concurrent_agents = 3, max_agent_calls = 100)

def Step(i):
    return agent("step %d" % i, follow_up("more"))

def main():
    firsts = evaluate_all([agent("first %d" % i) for i in range(5)])
    chain = []
    for i in range(12):
        chain.append(evaluate(Step(i)))
    return [
        ",".join(firsts), "|", ",".join(chain), "|",
        parallel([block(agent("p%d" % i)) for i in range(20)]),
    ]
`

// TestContinueAsNew: a run that continues as new every few effects (as
// it does when Temporal suggests it) ends with the text of an
// uninterrupted run, and no agent session runs twice: each execution
// resumes the journal of the ones before.
func TestContinueAsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.star")
	if err := os.WriteFile(path, []byte(longFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, path, &echoAgent{})
	if err != nil {
		t.Fatal(err)
	}
	agent := &echoAgent{}
	got, executions, err := runContinued(t, path, temporal.Options{DefaultAgent: agent}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("continued %d times:\n%s\nuninterrupted:\n%s", executions-1, got, want)
	}
	if executions < 8 {
		t.Fatalf("%d executions for 37 sessions continuing after 4 effects", executions)
	}
	if n := agent.calls.Load(); n != 37 {
		t.Fatalf("%d sessions ran for 37 agents", n)
	}
	t.Logf("37 sessions in %d executions", executions)
}

const continuedWorkspaceFlow = `configure(workspace_provider = deterministic_workspace(), sandbox_provider = local_sandbox())

def main():
    steps = [script("echo %d >> log.txt" % i, shell = "sh") for i in range(8)]
    return workspace(sandbox(steps, script(command = "cat", args = ["log.txt"]), access = "read-write"), id = "kept")
`

// TestContinueAsNewWorkspace: a workspace open when the run continues as
// new comes back in the next execution with the files the previous one
// left (restored from its newest checkpoint), and the scripts recorded
// before do not run again.
func TestContinueAsNewWorkspace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.star")
	if err := os.WriteFile(path, []byte(continuedWorkspaceFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, executions, err := runContinued(t, path, temporal.Options{Checkpoints: persist.NewMemoryStorage()}, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || executions < 3 {
		t.Fatalf("in %d executions:\n%q\nuninterrupted:\n%q", executions, got, want)
	}
}

// TestContinueAsNewDivergence: when the program an execution resumes no
// longer matches the journal (the bundle changed), the run fails with the
// divergence a local resume reports, naming the changed node.
func TestContinueAsNewDivergence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.star")
	if err := os.WriteFile(path, []byte(longFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "long.star")
	if err := os.WriteFile(edited, []byte(strings.Replace(string(changed), `"first %d"`, `"FIRST %d"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := temporal.Pack(edited)
	if err != nil {
		t.Fatal(err)
	}
	_, executions, err := runContinued(t, path, temporal.Options{DefaultAgent: &echoAgent{}}, 6, func(in *temporal.RunInput) { in.Bundle = other })
	if err == nil || executions != 2 {
		t.Fatalf("a changed bundle resumed in execution %d: %v", executions, err)
	}
	if !strings.Contains(err.Error(), "long.star:7:33: agent() no longer matches the journal: its prompt changed") {
		t.Fatalf("the divergence: %v", err)
	}
}

// TestContinueAsNew20000: a run of 20,000 agent sessions completes across
// executions that continue as new, each session run once.
func TestContinueAsNew20000(t *testing.T) {
	sizetest.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("20,000 sessions: skipped with -short")
	}
	path := filepath.Join(t.TempDir(), "wide.star")
	src := `configure(max_concurrent_agents = 200, max_agent_calls = 0)

def main():
    n = 0
    for b in range(100):
        n += len(evaluate_all([agent("s%d-%d" % (b, i)) for i in range(200)]))
    return str(n)
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := &countAgent{}
	started := time.Now()
	got, executions, err := runContinued(t, path, temporal.Options{DefaultAgent: agent}, 5000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != "20000" || agent.calls.Load() != 20000 {
		t.Fatalf("%q after %d sessions", got, agent.calls.Load())
	}
	t.Logf("20,000 sessions in %d executions, %s", executions, time.Since(started).Round(time.Millisecond))
}

// countAgent answers at once and counts its sessions.
type countAgent struct{ calls atomic.Int64 }

func (a *countAgent) Name() string { return "count" }
func (a *countAgent) Run(context.Context, *eval.AgentRequest, *eval.AgentExecution) (*eval.AgentResponse, error) {
	a.calls.Add(1)
	return &eval.AgentResponse{Text: "ok"}, nil
}

// skillAgent reads what was staged for it: its skill's SKILL.md (and the
// package's script), and the file an oversized include() points at.
type skillAgent struct{}

func (skillAgent) Name() string                              { return "skilled" }
func (skillAgent) SupportsSandbox(*eval.SandboxSession) bool { return true }
func (a skillAgent) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	if len(req.Skills) != 1 {
		return nil, fmt.Errorf("%d skills", len(req.Skills))
	}
	read := func(p string) ([]byte, error) {
		if exec.Sandbox != nil {
			r, err := exec.Sandbox.Runtime.Exec(ctx, "cat", []string{p}, eval.ExecOptions{})
			if err != nil {
				return nil, err
			}
			return r.Stdout, nil
		}
		return os.ReadFile(p)
	}
	skill, err := read(req.Skills[0].SkillFile)
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile("Read it from `([^`]+)`").FindStringSubmatch(req.Prompt)
	if m == nil {
		return nil, fmt.Errorf("no staged include in %q", req.Prompt)
	}
	big, err := read(m[1])
	if err != nil {
		return nil, err
	}
	return &eval.AgentResponse{Text: fmt.Sprintf("%s|%d|%s", strings.TrimSpace(string(skill[strings.LastIndex(string(skill), "---")+3:])), len(big), req.Skills[0].Name)}, nil
}

const skillFlow = `configure(workspace_provider = deterministic_workspace(), sandbox_provider = local_sandbox())

def main():
    return [
        agent(skill("skills/review"), include(src = "big.txt", max_bytes = 10)),
        "\n",
        workspace(sandbox(agent(skill("skills/review"), include(src = "big.txt", max_bytes = 10)), access = "read-write")),
    ]
`

// TestSkillsOnTemporal: skill() packages named by a literal travel in
// the bundle and are staged for the agent wherever its session runs: on
// the session's worker for an agent outside a sandbox (with the oversized
// include staged beside them, the request naming the worker's paths), in
// the sandbox's staging for one inside. The text is the in-process one.
func TestSkillsOnTemporal(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("skills/review/scripts", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"skills/review/SKILL.md":       "---\nname: review\ndescription: Reviews a change.\n---\nRead the diff first.\n",
		"skills/review/scripts/run.sh": "echo hi\n",
		"big.txt":                      strings.Repeat("line\n", 50),
		"flow.star":                    skillFlow,
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := temporal.Pack("flow.star")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Data) != 3 {
		t.Fatalf("packed %d data files, want the package's two and big.txt", len(b.Data))
	}
	want, err := inProcess(t, "flow.star", skillAgent{})
	if err != nil || want != "Read the diff first.|250|review\nRead the diff first.|250|review" {
		t.Fatalf("in process: %q, %v", want, err)
	}
	got, held, err := runLeases(t, "flow.star", temporal.Options{DefaultAgent: skillAgent{}})
	if err != nil || got != want || held != 0 {
		t.Fatalf("on Temporal: %q (%d leases held), %v", got, held, err)
	}
}

const boundedIncludeFlow = `configure(
    agent_provider = deterministic_agent(supports_sandbox = True, respond = lambda req: req.prompt),
    workspace_provider = local_workspace(directory = %q),
    sandbox_provider = local_sandbox(),
)

def main():
    return workspace(
        agent(include(path = "mid.txt", max_bytes = 1000, title = False)),
        " | ",
        sandbox(agent(include(path = "long.txt", max_bytes = 1000, title = False), " ", include(path = "small.txt", max_bytes = 1000, title = False))),
        " | ",
        sandbox(agent(include(path = "huge.bin", max_bytes = 1000))),
    )
`

// TestBoundedIncludeOnTemporal: include(path=) with max_bytes of a file in
// a workspace or sandbox held on a worker reads no further than its bound
// there either: a 71 MB text in the sandbox is counted in its first
// 64 MiB, in chunks (one activity each) that stay under the service's
// payload limit, the workspace's (3 MB) is staged for the agent through
// such chunks, and a 100 GB
// sparse file is refused at its first NUL byte.
func TestBoundedIncludeOnTemporal(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 30); err != nil {
		t.Skipf("skipping: cannot create a 100 GB sparse file here (%v)", err)
	}
	f.Close()
	text := strings.Repeat("0123456789abcdef\n", 4_200_000) // 71 MB, over the 64 MiB counted
	if err := os.WriteFile(filepath.Join(dir, "long.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mid.txt"), []byte(text[:3_400_000]), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bounded.star")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(boundedIncludeFlow, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, held, err := runLeases(t, path, temporal.Options{})
	if err == nil || !strings.Contains(err.Error(), "the file contains a NUL byte at offset 0") {
		t.Fatalf("a 100 GB sparse include on a worker: %v", err)
	}
	if held != 0 {
		t.Fatalf("%d leases still held after the run", held)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(fmt.Sprintf(boundedIncludeFlow, dir), `        " | ",
        sandbox(agent(include(path = "huge.bin", max_bytes = 1000))),
`, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	got, held, err := runLeases(t, path, temporal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	staged := regexp.MustCompile(`/aml-agent-[0-9]+/`)
	if staged.ReplaceAllString(got, "/STAGING/") != staged.ReplaceAllString(want, "/STAGING/") {
		t.Fatalf("on Temporal:\n%.600s\nin process:\n%.600s", got, want)
	}
	// The workspace's file is staged for the agent (streamed, whole); the
	// sandbox's is left in place and counted in its first 64 MiB.
	const counted = "is 71,400,000 bytes and at least 3,947,581 lines (counted in its first 67,108,864 bytes)"
	if !strings.Contains(got, "`mid.txt` is 3,400,000 bytes and 200,000 lines") || strings.Count(got, counted) != 1 || !strings.HasSuffix(got, "small") {
		t.Fatalf("result %.600q", got)
	}
	if held != 0 {
		t.Fatalf("%d leases still held after the run", held)
	}
}
