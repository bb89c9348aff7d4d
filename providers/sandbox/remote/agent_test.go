package remote_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
)

// buildStatic builds a static Linux binary of a package of this module.
func buildStatic(t *testing.T, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
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
	box := &starlib.Extension{Name: "remote-test", Builtins: []*starlib.Builtin{{
		Name: "remote_box", Group: "providers", Doc: "The remote test sandbox.", Returns: "a sandbox provider",
		Impl: func(*starlib.Call) (starlark.Value, error) { return &starlib.SandboxProviderValue{Provider: p}, nil },
	}}}
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
