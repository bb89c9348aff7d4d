package cli

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/internal/modaldouble"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// TestKilledRunRemoteSandboxes: an aml run killed (SIGKILL, so nothing of
// it cleans up) while a script runs in a Daytona or Modal sandbox leaves
// that sandbox running; aml sandbox prune, given the service's
// credentials, finds it by its owner label and destroys it.
func TestKilledRunRemoteSandboxes(t *testing.T) {
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id: owners cannot be judged")
	}
	bin := buildAML(t)
	for _, tc := range []struct {
		name string
		// start starts the double and returns the environment of both
		// commands, the provider expression, the guest path of the
		// workspace and the double's containers.
		start func(t *testing.T) (env map[string]string, provider, guest string, docker *remotetest.Docker)
	}{
		{"daytona", func(t *testing.T) (map[string]string, string, string, *remotetest.Docker) {
			dbl := daytonadouble.New(t)
			return map[string]string{"DAYTONA_API_KEY": dbl.APIKey, "DAYTONA_API_URL": dbl.URL, "DAYTONA_ORGANIZATION_ID": "", "DAYTONA_TARGET": ""},
				`daytona_sandbox(workspace = ".")`, daytonadouble.Home + "/workspace", dbl.Docker()
		}},
		{"modal", func(t *testing.T) (map[string]string, string, string, *remotetest.Docker) {
			d := modaldouble.New(t)
			env := d.Env()
			env["MODAL_TOKEN_ID"], env["MODAL_TOKEN_SECRET"] = d.TokenID, d.TokenSecret
			return env, `modal_sandbox(workspace = ".")`, "/workspace", d.Docker()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, provider, guest, docker := tc.start(t)
			dir := t.TempDir()
			wf := filepath.Join(dir, "killed.star")
			if err := os.WriteFile(wf, []byte("box = "+provider+`

def main():
    return sandbox(script("echo started > started; sleep 300", shell = "sh"), provider = box, access = "read-write")
`), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "run", wf)
			cmd.Dir = dir
			cmd.Env = os.Environ()
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			started := func() bool {
				for _, id := range docker.Left(t) {
					p, err := docker.Machine(id).Start(context.Background(), remote.Command{Args: []string{"test", "-e", guest + "/started"}, Dir: "/"})
					if err != nil {
						continue
					}
					go io.Copy(io.Discard, p.Stdout())
					go io.Copy(io.Discard, p.Stderr())
					if code, err := p.Wait(); err == nil && code == 0 {
						return true
					}
				}
				return false
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			waitUntil(t, "the script to start in the "+tc.name+" sandbox", func() bool {
				select {
				case err := <-exited:
					t.Fatalf("the run ended before it was killed: %v\n%s", err, stderr.String())
				default:
				}
				return started()
			})
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			left := docker.Left(t)
			if len(left) != 1 {
				t.Fatalf("after the killed run: %d sandboxes, want its one (stderr: %s)", len(left), stderr.String())
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			var stdout, perr strings.Builder
			if code := cmdSandbox([]string{"prune"}, &stdout, &perr); code != exitOK {
				t.Fatalf("aml sandbox prune: exit %d: %s", code, perr.String())
			}
			if !strings.Contains(stdout.String(), "removed "+tc.name+" sandbox ") {
				t.Errorf("aml sandbox prune does not report the %s sandbox removed:\n%s%s", tc.name, stdout.String(), perr.String())
			}
			if left := docker.Left(t); len(left) != 0 {
				t.Errorf("after aml sandbox prune: sandboxes %v are left", left)
			}
		})
	}
}
