// Package dockertest gives tests a Docker engine and registry-free images
// for agents: a busybox image with this host's C and C++ libraries, in
// which the Linux builds of OpenCode, Node (and so Codex's adapter) and an
// aml built with cgo run. Tests skip, saying what is missing, when no
// engine answers.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// AgentImage is the image AgentImageFor makes.
// Its tag changes whenever what it holds does, so that an engine with an
// older one imports it again.
const AgentImage = "aml-test/glibc:4"

var importMu sync.Mutex

// Engine returns a client of a Docker engine that answers, or skips.
func Engine(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx)
	}
	if err != nil {
		t.Skipf("no Docker engine answers (%v): run scripts/docker-for-tests.sh, as .ci/run does", err)
	}
	return cli
}

// AgentImageFor returns AgentImage, importing it from this host's
// busybox-static and libraries when the engine lacks it, or skips when
// this host cannot provide them (it needs Debian's amd64 layout).
func AgentImageFor(t testing.TB, cli *client.Client) string {
	t.Helper()
	importMu.Lock()
	defer importMu.Unlock()
	if _, err := cli.ImageInspect(context.Background(), AgentImage); err == nil {
		return AgentImage
	}
	files := map[string]string{"bin/busybox": "/bin/busybox"}
	for _, lib := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
		"/lib/x86_64-linux-gnu/libpthread.so.0", "/lib/x86_64-linux-gnu/libdl.so.2", "/lib/x86_64-linux-gnu/libresolv.so.2",
		"/lib/x86_64-linux-gnu/libutil.so.1", "/lib/x86_64-linux-gnu/librt.so.1",
		"/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libgcc_s.so.1"} {
		files[strings.TrimPrefix(lib, "/")] = lib
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// The CA bundle: an agent's HTTP client may load it even for a plain
	// http endpoint (Copilot's does).
	files["etc/ssl/certs/ca-certificates.crt"] = "/etc/ssl/certs/ca-certificates.crt"
	for _, d := range []string{"bin/", "lib/", "lib/x86_64-linux-gnu/", "lib64/", "usr/", "usr/bin/", "etc/", "etc/ssl/", "etc/ssl/certs/"} {
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for _, d := range []string{"tmp/", "workspace/", "root/"} {
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777})
	}
	for name, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Skipf("cannot build %s from this host (%v): it needs busybox-static, the C and C++ libraries of Debian amd64 and ca-certificates", AgentImage, err)
		}
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data))})
		_, _ = tw.Write(data)
	}
	for _, applet := range []string{"sh", "cat", "echo", "ls", "mkdir", "rm", "pwd", "kill", "sleep", "env", "chmod", "id", "true", "printf", "uname", "which"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	_ = tw.WriteHeader(&tar.Header{Name: "usr/bin/env", Typeflag: tar.TypeSymlink, Linkname: "/bin/busybox", Mode: 0o777})
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\n")
	_ = tw.WriteHeader(&tar.Header{Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))})
	_, _ = tw.Write(passwd)
	_ = tw.Close()
	rc, err := cli.ImageImport(context.Background(), image.ImportSource{Source: &buf, SourceName: "-"}, AgentImage, image.ImportOptions{Changes: []string{"ENV PATH=/bin:/usr/bin"}})
	if err != nil {
		t.Fatalf("importing %s: %v", AgentImage, err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	return AgentImage
}
