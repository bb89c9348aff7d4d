//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec/hostexectest"
	"github.com/aml-go/aml/providers/sandbox/local"
)

func TestMain(m *testing.M) {
	hostexectest.BecomeSubreaper()
	os.Exit(m.Run())
}

func awaitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(hostexectest.HangBound):
		t.Fatal("Exec did not return")
		return nil
	}
}

func TestSetupFailureLeavesNoProcess(t *testing.T) {
	ws := t.TempDir()
	p := newProvider(t, local.Options{Setup: "echo $$ > setup-pid; sleep 300 & echo failing >&2; exit 1"})
	_, err := p.Acquire(context.Background(), request(ws, eval.ReadWrite, ".", "."))
	hostexectest.WantErr(t, err, "setup failed with exit code 1: failing")
	hostexectest.AssertGroupGone(t, hostexectest.ReadPID(t, filepath.Join(ws, "setup-pid")))
}

func TestAcquireCancelledDuringSetup(t *testing.T) {
	ws := t.TempDir()
	p := newProvider(t, local.Options{Setup: "echo $$ > setup-pid; " + hostexectest.TreeScript})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		l, err := p.Acquire(ctx, request(ws, eval.ReadWrite, ".", "."))
		if l != nil {
			err = errors.New("a lease was returned")
		}
		done <- err
	}()
	pgid := hostexectest.ReadPID(t, filepath.Join(ws, "setup-pid"))
	hostexectest.WaitGroupSize(t, pgid, 3)
	cause := errors.New("shutdown")
	cancel(cause)
	if err := awaitErr(t, done); !errors.Is(err, cause) {
		t.Fatalf("Acquire err = %v, want the cause", err)
	}
	hostexectest.AssertGroupGone(t, pgid)
}
