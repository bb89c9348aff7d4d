package durable_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/internal/durable"
)

func TestSyncDir(t *testing.T) {
	if err := durable.SyncDir(t.TempDir()); err != nil {
		t.Fatalf("syncing a directory: %v", err)
	}
	if err := durable.SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing directory: %v, want ErrNotExist", err)
	}
}
