package remotestar_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/modaldouble"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/remotestar"
)

// TestModalSandbox: modal_sandbox() against the Modal double, driven only
// through Modal's official SDK: a read-write workspace is hydrated into
// /workspace, changed by a script and mirrored back exactly, an ACP agent
// in the sandbox calls a host tool through the tunnel and submits a
// structured result, and no sandbox is left; the tokens never reach the
// result.
func TestModalSandbox(t *testing.T) {
	d := modaldouble.New(t)
	bin := t.TempDir()
	fake := filepath.Join(bin, "fake-acp-agent")
	buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", fake)
	d.Docker().Files = map[string]string{"/bin/fake-acp-agent": fake, "/bin/aml": fake}
	ext := remotestar.New(remotestar.Options{Modal: func(o modal.Options) (remote.Service, error) {
		var s *modal.Service
		var err error
		modaldouble.WithEnv(d.Env(), func() { s, err = modal.New(o) })
		if err == nil {
			t.Cleanup(s.Close)
		}
		return s, err
	}})
	dir := seedWorkspace(t)
	src := agentWorkflow(dir, `modal_sandbox(token_id = env("ID"), token_secret = env("SECRET"), app_name = "aml-test", create = {"cpu": 1, "timeout_ms": 600000})`, "")
	env := func(k string) (string, bool) {
		switch k {
		case "ID":
			return d.TokenID, true
		case "SECRET":
			return d.TokenSecret, true
		}
		return "", false
	}
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: []*starlib.Extension{ext, acpstar.New(acpstar.Options{})}, Env: env}, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prose, structured, _ := strings.Cut(out, "|")
	if !strings.Contains(prose, "/workspace") || !strings.Contains(prose, "result: found ocelot") || !strings.Contains(prose, "[same]") {
		t.Errorf("in the Modal sandbox: %q, want its cwd /workspace and the host tool's result", prose)
	}
	if structured != `{"answer":42}` {
		t.Errorf("structured result %q", structured)
	}
	if got := listTree(t, dir); got != "added/ added/a.txt=a added/f.txt=f change.txt=new keep.txt=same" {
		t.Errorf("mirrored: %s", got)
	}
	if strings.Contains(out, d.TokenSecret) {
		t.Error("the token secret reached the result")
	}
	if left := d.Docker().Left(t); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
}

// TestModalCreate: create= keys are checked, with the list of keys for an
// unknown one.
func TestModalCreate(t *testing.T) {
	ext := remotestar.New(remotestar.Options{Modal: func(modal.Options) (remote.Service, error) { return nil, nil }})
	for src, want := range map[string]string{
		`modal_sandbox(create = {"cpu": "two"})`:    `create["cpu"] must be a number`,
		`modal_sandbox(create = {"memory": 1})`:     `create= has no key "memory"; the keys are block_network`,
		`modal_sandbox(create = {"timeout_ms": 0})`: `create["timeout_ms"] must be positive`,
		`modal_sandbox(create = {"regions": [1]})`:  `create["regions"] must be a list of strings`,
	} {
		_, err := starlib.Run(context.Background(), "w.star", "", starlib.LoadOptions{Source: []byte("b = " + src + "\ndef main():\n    return 1\n"), Extensions: []*starlib.Extension{ext}}, eval.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}
