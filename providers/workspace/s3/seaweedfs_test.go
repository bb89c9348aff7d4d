package s3_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/aml-go/aml/internal/s3test"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
	aws3 "github.com/aml-go/aml/providers/workspace/s3"
)

// seaweedfs starts `weed mini` (the heavy S3 tier: it honours the
// conditional GET and DELETE that gofakes3 ignores) and returns a client
// of it with the bucket created, or skips saying how to get it.
func seaweedfs(t *testing.T, bucket string) *s3.Client {
	t.Helper()
	bin := os.Getenv("AML_SEAWEEDFS")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "aml-seaweedfs", "weed")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("SeaweedFS is not built (%v): scripts/seaweedfs.sh builds weed from the module proxy (about 12 minutes, once), or set AML_SEAWEEDFS; .ci/run builds it when it is not cached", err)
	}
	data := t.TempDir()
	cmd := exec.Command(bin, "mini", "-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AK", "AWS_SECRET_ACCESS_KEY=SK")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, _ := os.Create(filepath.Join(data, "weed.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
	})
	cli := s3test.Client("http://127.0.0.1:8333")
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		cancel()
		if err == nil {
			return cli
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(data, "weed.log"))
			t.Fatalf("weed mini did not serve S3 on 127.0.0.1:8333 within 90 s: %v\n%s", err, b)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSeaweedFS: the protocol contract and the workspace conformance
// suite against a real SeaweedFS, which honours every conditional.
func TestSeaweedFS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts SeaweedFS: not under -short")
	}
	cli := seaweedfs(t, "work")
	rep, err := aws3.Verify(context.Background(), cli, "work", "verify")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.Result != aws3.Honoured {
			t.Errorf("SeaweedFS: %s: %s (%s)", c.Operation, c.Result, c.Detail)
		}
	}
	if !rep.Trusted {
		t.Errorf("SeaweedFS is not trusted")
	}
	for _, format := range []string{"archive", "folder"} {
		p, err := aws3.New(aws3.Options{Client: cli, Bucket: "work", Prefix: "conformance-" + format, StoreOptions: persist.StoreOptions{Format: format}})
		if err != nil {
			t.Fatal(err)
		}
		providertest.RunWorkspace(t, p, providertest.WorkspaceOptions{CheckContent: true})
	}
	// Each storage of the damage and names suites gets a prefix of its own.
	n := 0
	storage := func(tb testing.TB) persist.Storage {
		n++
		st, err := aws3.NewStorage(aws3.Options{Client: cli, Bucket: "work", Prefix: fmt.Sprintf("damage-%d", n)})
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}
	persisttest.RunDamage(t, storage)
	persisttest.RunNames(t, storage)
}
