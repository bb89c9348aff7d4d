package remotestar_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/testbin"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/remotestar"
)

// buildStatic builds a static Linux binary of a package of this module.
func buildStatic(t *testing.T, pkg, out string) {
	t.Helper()
	testbin.BuildTo(t, pkg, testbin.Options{Static: true}, out)
}

// listTree lists dir as "path=content" and "path/", sorted.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out = append(out, rel+"/")
		} else {
			data, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(data))
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestDaytonaSandbox: daytona_sandbox() against the Daytona double (every
// request and response checked against the published API): a read-write
// workspace is hydrated, changed by a script (added, changed, deleted) and
// mirrored back exactly; read-only refuses commands; an ACP agent in the
// sandbox calls a host tool through the tunnel and submits a structured
// result; no sandbox is left and the key is never printed.
func TestDaytonaSandbox(t *testing.T) {
	dbl := daytonadouble.New(t)
	bin := t.TempDir()
	fake := filepath.Join(bin, "fake-acp-agent")
	buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", fake)
	dbl.Docker().Files = map[string]string{"/bin/fake-acp-agent": fake, "/bin/aml": fake}
	for _, v := range []string{"DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_ORGANIZATION_ID", "DAYTONA_TARGET"} {
		t.Setenv(v, "")
	}
	t.Setenv("DAYTONA_API_KEY", dbl.APIKey)
	dir := seedWorkspace(t)
	src := agentWorkflow(dir, `daytona_sandbox(api_url = `+strconv.Quote(dbl.URL)+`, api_key = env("DAYTONA_API_KEY"), labels = {"team": "docs"})`, "; pwd")
	exts := []*starlib.Extension{remotestar.Extension, acpstar.New(acpstar.Options{})}
	env := func(k string) (string, bool) { return os.LookupEnv(k) }
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: exts, Env: env}, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prose, structured, _ := strings.Cut(out, "|")
	if !strings.Contains(prose, daytonadouble.Home+"/workspace") || !strings.Contains(prose, "result: found ocelot") || !strings.Contains(prose, "[same]") {
		t.Errorf("in the Daytona sandbox: %q, want its cwd in the home's workspace and the host tool's result", prose)
	}
	if structured != `{"answer":42}` {
		t.Errorf("structured result %q", structured)
	}
	if got := listTree(t, dir); got != "added/ added/a.txt=a added/f.txt=f change.txt=new keep.txt=same" {
		t.Errorf("mirrored: %s", got)
	}
	if strings.Contains(out, dbl.APIKey) {
		t.Error("the API key reached the result")
	}
	if left := dbl.Docker().Left(t); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
	if errs := dbl.TakeErrors(); len(errs) > 0 {
		t.Errorf("requests or responses off the published API: %v", errs)
	}

	// Read-only: file() and commands are refused, the source stays.
	ro := strings.Replace(src, `access = "read-write"`, `access = "read-only"`, 1)
	_, err = starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(ro), Extensions: exts, Env: env}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), "file() cannot write through a read-only sandbox()") {
		t.Errorf("file() in a read-only Daytona sandbox: %v", err)
	}
	ro = strings.Replace(ro, `file("f", path = "added/f.txt"),`, "", 1)
	_, err = starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(ro), Extensions: exts, Env: env}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot execute under read-only access") {
		t.Errorf("a script in a read-only Daytona sandbox: %v", err)
	}
	if got := listTree(t, dir); got != "added/ added/a.txt=a added/f.txt=f change.txt=new keep.txt=same" {
		t.Errorf("after the read-only run: %s", got)
	}
}

// TestDaytonaOptions: image= with snapshot=, and image in create=, are
// refused with what to do.
func TestDaytonaOptions(t *testing.T) {
	for src, want := range map[string]string{
		`daytona_sandbox(image = "a", snapshot = "b", api_key = "k")`: "image= and snapshot= cannot both be given",
		`daytona_sandbox(create = {"image": "x"}, api_key = "k")`:     `create= cannot hold "image"`,
		`daytona_sandbox(create = {"snapshot": "x"}, api_key = "k")`:  `create= cannot hold "snapshot"`,
		`daytona_sandbox(create_timeout_ms = 0, api_key = "k")`:       "create_timeout_ms must be a positive integer",
		`daytona_sandbox(setup = " x", api_key = "k")`:                "setup",
	} {
		_, err := starlib.Run(context.Background(), "w.star", "", starlib.LoadOptions{Source: []byte("b = " + src + "\ndef main():\n    return 1\n"), Extensions: []*starlib.Extension{remotestar.Extension}}, eval.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// seedWorkspace makes a workspace of three files, one below a directory.
func seedWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"keep.txt": "same", "change.txt": "old", "gone/inner.txt": "x"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// agentWorkflow is a workflow over the workspace dir with the sandbox
// provider box: a script (its source ended by extra) adds, changes and
// deletes files, an agent calls the host tool lookup, and, after "|", an
// agent submits a structured result.
func agentWorkflow(dir, box, extra string) string {
	return `configure(workspace_provider = local_workspace(directory = ` + strconv.Quote(dir) + `))
box = ` + box + `
lookup = define_tool(name = "lookup", description = "Looks a word up.", execute = lambda input: "found " + input["q"],
    input = schema.object(q = schema.string()))
fake = acp_agent(command = "fake-acp-agent", env = {"AML_FAKE_ACP_MODE": "no-http"})

def main():
    return workspace(
        sandbox(
            script("printf new > change.txt; rm -r gone; mkdir -p added && printf a > added/a.txt` + extra + `", shell = "sh"),
            agent("cwd\nmcp\ncall lookup {\"q\": \"ocelot\"}", tool(lookup), provider = fake),
            file("f", path = "added/f.txt"),
            "[", include(path = "keep.txt", title = False), "]",
            "|",
            agent("submit {\"answer\": 42}", tool(lookup), provider = fake, schema = schema.object(answer = schema.integer())),
            provider = box,
            access = "read-write",
        ),
    )
`
}
