package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/testbin"

	"github.com/docker/docker/api/types/build"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// sandboxBase is the base image of images/sandbox/Dockerfile.
const sandboxBase = "debian:bookworm-slim"

// TestSandboxImage builds images/sandbox/Dockerfile (Debian, aml, Node 22
// and the pinned agents) and checks what a sandbox of it has. It needs
// the base image on the engine and the Debian and npm registries for the
// build; the layers before the aml binary are cached by the engine, so
// only the first build takes minutes.
func TestSandboxImage(t *testing.T) {
	cli := engine(t)
	if testing.Short() {
		t.Skip("builds an image (minutes the first time): not under -short")
	}
	if _, err := cli.ImageInspect(context.Background(), sandboxBase); err != nil {
		t.Skipf("the base image %s is not on the engine (%v): docker pull %s, or import a debootstrap of bookworm under that tag (scripts/docker-for-tests.sh --debian does that)", sandboxBase, err, sandboxBase)
	}
	amlBin := testbin.Build(t, "github.com/aml-go/aml/cmd/aml", testbin.Options{Static: true})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := map[string]string{"Dockerfile": "../../../images/sandbox/Dockerfile", "aml": amlBin}
	// A TLS-inspecting proxy's authorities, as a user behind one adds them.
	cas, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	for _, ca := range cas {
		files["ca/"+filepath.Base(ca)] = ca
	}
	for name, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data))})
		_, _ = tw.Write(data)
	}
	_ = tw.Close()
	const tag = "aml-test/sandbox:dev"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, NetworkMode: "host", Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("building images/sandbox/Dockerfile: %v", err)
	}
	var log strings.Builder
	dec := json.NewDecoder(res.Body)
	for {
		var msg struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading the build: %v\n%s", err, log.String())
		}
		log.WriteString(msg.Stream)
		if msg.Error != "" {
			res.Body.Close()
			t.Fatalf("building images/sandbox/Dockerfile: %s\n%s", msg.Error, log.String())
		}
	}
	res.Body.Close()

	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil { // the image's user is aml (uid 1000)
		t.Fatal(err)
	}
	p, err := docker.New(docker.Options{Client: cli, Image: tag})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "image",
		Workspace: &eval.WorkspaceMaterialization{Directory: ws}})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--version"}, "v22."},
		{[]string{"aml", "version"}, "aml"},
		{[]string{"opencode", "--version"}, "1.18.33"},
		{[]string{"codex", "--version"}, "0.171.0"},
		{[]string{"id", "-un"}, "aml"},
		{[]string{"sh", "-c", "echo ok > probe && cat probe"}, "ok"},
	} {
		r, err := lease.Runtime().Exec(context.Background(), c.args[0], c.args[1:], eval.ExecOptions{})
		if err != nil || r.ExitCode != 0 || !strings.Contains(string(r.Stdout)+string(r.Stderr), c.want) {
			t.Errorf("%v in the image: %+v, %v; want %q", c.args, r, err, c.want)
		}
	}
}
