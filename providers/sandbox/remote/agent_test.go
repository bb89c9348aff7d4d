package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/testbin"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
)

// buildStatic builds a static Linux binary of a package of this module.
func buildStatic(t *testing.T, pkg, out string) {
	t.Helper()
	testbin.BuildTo(t, pkg, testbin.Options{Static: true}, out)
}

// TestAgentInRemoteSandbox: a real ACP agent process (the fake agent, a
// static build in the sandbox's image) runs in a remote sandbox that
// shares no directory and no network with the host, calls a Starlark tool
// that runs on the host (its relay reaches the tool bridge through the
// tunnel over a sandbox process's streams) and submits a structured
// result; the workspace it changed is mirrored back.
func TestAgentInRemoteSandbox(t *testing.T) {
	d := remotetest.New(t, "/home/user")
	bin := t.TempDir()
	fake := filepath.Join(bin, "fake-acp-agent")
	buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", fake)
	// The image's PATH is /bin.
	d.Files = map[string]string{"/bin/fake-acp-agent": fake, "/bin/aml": fake}
	p, err := remote.New(remote.Options{Service: d, GuestRoot: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	box := boxExtension(p)
	dir := t.TempDir()
	src := `configure(workspace_provider = local_workspace(directory = ` + strconv.Quote(dir) + `))
lookup = define_tool(name = "lookup", description = "Looks a word up.", execute = lambda input: "found " + input["q"],
    input = schema.object(q = schema.string()))
fake = acp_agent(command = "fake-acp-agent", env = {"AML_FAKE_ACP_MODE": "no-http"})

def main():
    return workspace(sandbox(
        agent("cwd\nmcp\ncall lookup {\"q\": \"ocelot\"}", tool(lookup), provider = fake),
        script("printf made > made.txt", shell = "sh"),
        "|",
        agent(
            "submit {\"answer\": 42}",
            tool(lookup),
            provider = fake,
            schema = schema.object(answer = schema.integer()),
        ),
        provider = remote_box(),
        access = "read-write",
    ))
`
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: []*starlib.Extension{box, acpstar.New(acpstar.Options{})}},
		eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prose, structured, _ := strings.Cut(out, "|")
	if !strings.Contains(prose, `"command":"aml"`) || !strings.Contains(prose, "unix:///tmp/aml-run-") {
		t.Errorf("the bridge is not reached through the relay over the tunnel: %q", prose)
	}
	if !strings.Contains(prose, "/home/user/workspace") || !strings.Contains(prose, "result: found ocelot") {
		t.Errorf("the agent in the sandbox: %q, want its cwd in the guest root and the host tool's result", prose)
	}
	if structured != `{"answer":42}` {
		t.Errorf("structured result %q, want the submitted one", structured)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(data) != "made" {
		t.Errorf("the script's file was not mirrored back: %q %v", data, err)
	}
	if left := d.Left(t); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
}

// boxExtension makes remote_box() return p.
func boxExtension(p *remote.Provider) *starlib.Extension {
	return &starlib.Extension{Name: "remote-test", Builtins: []*starlib.Builtin{{
		Name: "remote_box", Group: "providers", Doc: "The remote test sandbox.", Returns: "a sandbox provider",
		Impl: func(*starlib.Call) (starlark.Value, error) { return &starlib.SandboxProviderValue{Provider: p}, nil },
	}}}
}

// TestParallelSandboxes: ten sandboxes in parallel(), each over its own
// subtree of the workspace, each changed by a script and mirrored back;
// none is left.
func TestParallelSandboxes(t *testing.T) {
	d := remotetest.New(t, "/home/user")
	p, err := remote.New(remote.Options{Service: d, GuestRoot: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	src := `configure(workspace_provider = local_workspace(directory = "` + base + `"))

def one(i):
    return sandbox(
        script("cat seed.txt; printf %s > out.txt" % i, shell = "sh"),
        provider = remote_box(),
        access = "read-write",
        root = "w%d" % i,
    )

def main():
    return workspace(parallel(*[one(i) for i in range(10)]))
`
	for i := range 10 {
		dir := filepath.Join(base, "w"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "seed.txt"), []byte("seed"+strconv.Itoa(i)+" "), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	out, err := starlib.Run(context.Background(), filepath.Join(base, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: []*starlib.Extension{boxExtension(p)}}, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if !strings.Contains(out, "seed"+strconv.Itoa(i)+" ") {
			t.Errorf("branch %d's script did not see its seed: %q", i, out)
		}
		data, err := os.ReadFile(filepath.Join(base, "w"+strconv.Itoa(i), "out.txt"))
		if err != nil || string(data) != strconv.Itoa(i) {
			t.Errorf("branch %d: out.txt = %q, %v", i, data, err)
		}
	}
	if left := d.Left(t); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
	t.Logf("10 sandboxes in parallel in %v", time.Since(start).Round(time.Millisecond))
}

// TestMeteredAgentInRemoteSandbox: an agent of a metering profile in a
// remote sandbox, which shares no network with the host, reaches its
// model through aml model-relay in the sandbox, the tunnel and the host's
// model gateway: its calls reach the model, and the spend counted is
// exactly what the model's answers said.
func TestMeteredAgentInRemoteSandbox(t *testing.T) {
	d := remotetest.New(t, "/home/user")
	bin := t.TempDir()
	fake := filepath.Join(bin, "fake-acp-agent")
	buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", fake)
	d.Files = map[string]string{"/bin/fake-acp-agent": fake, "/bin/aml": fake}
	p, err := remote.New(remote.Options{Service: d, GuestRoot: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.Start(nil)
	defer model.Close()
	ext := remotetest.MeteredAgent(t, model.URL)
	dir := t.TempDir()
	src := `configure(workspace_provider = local_workspace(directory = ` + strconv.Quote(dir) + `))

def main():
    return workspace(sandbox(agent("model 3", provider = metered_fake()), provider = remote_box(), access = "read-write"))
`
	var spent eval.Usage
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: []*starlib.Extension{boxExtension(p), ext}},
		eval.Options{OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "FAKE-REPLY: ") {
		t.Errorf("the agent said %q, want the model's answer", out)
	}
	reqs := int64(len(model.Requests()))
	if reqs != 3 || spent.ModelCalls != 3 || spent.InputTokens != 10*reqs || spent.OutputTokens != 5*reqs {
		t.Errorf("%d model requests, %+v counted; want 3 calls of 10 input and 5 output tokens", reqs, spent)
	}
	if left := d.Left(t); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
}
