package modal_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/modaldouble"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// The remote sandbox provider over the Modal client: the conformance
// suite, then a read-write lease whose workspace is uploaded to
// /workspace, changed by a script and mirrored back on release, which
// terminates the sandbox.
func TestRemoteProvider(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{}, nil)
	p, err := remote.New(remote.Options{Service: s, GuestRoot: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	providertest.RunSandbox(t, p, providertest.SandboxOptions{Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}, Exercise: true})

	dir := t.TempDir()
	for name, content := range map[string]string{"keep.txt": "same", "change.txt": "old", "gone/inner.txt": "x"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t)
	lease, err := p.Acquire(ctx, &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "modal-test",
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", `set -e
test "$(cat keep.txt)" = same
printf new > change.txt
rm -r gone
mkdir -p added && printf a > added/a.txt
pwd`}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("script: %v %+v", err, res)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "/workspace" {
		t.Errorf("the script ran in %s", got)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel+"="+string(b))
		}
		return err
	})
	slices.Sort(got)
	if want := []string{"added/a.txt=a", "change.txt=new", "keep.txt=same"}; !slices.Equal(got, want) {
		t.Errorf("mirrored: %v, want %v", got, want)
	}
	if r := d.Running(); len(r) != 0 {
		t.Errorf("running after the releases: %v", r)
	}
	for _, sb := range d.Sandboxes() {
		if sb.Tags[remote.LabelRun] == "" || sb.Tags[remote.LabelLease] == "" || sb.Tags[remote.LabelOwner] == "" {
			t.Errorf("a sandbox without the provider's labels: %+v", sb)
		}
	}
}
