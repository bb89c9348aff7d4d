//go:build unix

package journal

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestLoadKeyCreatesAndReuses(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "config", "aml", "journal.key")
	key, created, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !created || len(key) != KeySize {
		t.Fatalf("first LoadKey: created %v, %d bytes; want a new key of %d bytes", created, len(key), KeySize)
	}
	if bytes.Equal(key, make([]byte, KeySize)) {
		t.Fatal("the new key is all zeros")
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700, filepath.Join(base, "config"): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %o, want %o", p, got, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the key's directory holds %d entries, want only the key (no temporary file left)", len(entries))
	}
	again, created, err := LoadKey(path)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("second LoadKey: created %v, same key %v, %v; want the same key, not created", created, bytes.Equal(again, key), err)
	}
}

func TestLoadKeyConcurrentFirstUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aml", "journal.key")
	const n = 16
	keys := make([][]byte, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], created[i], errs[i] = LoadKey(path)
		}()
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("LoadKey %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("LoadKey %d returned another key than LoadKey 0: concurrent first uses disagree", i)
		}
		if created[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d LoadKeys report they created the key, want 1", winners)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the key's directory holds %d entries, want only the key", len(entries))
	}
}

func TestLoadKeyRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, path string)
		want []string
	}{
		{"short", func(t *testing.T, path string) {
			os.WriteFile(path, make([]byte, KeySize-1), 0o600)
		}, []string{"31 bytes", "32"}},
		{"long", func(t *testing.T, path string) {
			os.WriteFile(path, make([]byte, KeySize+1), 0o600)
		}, []string{"more than 32 bytes"}},
		{"empty", func(t *testing.T, path string) {
			os.WriteFile(path, nil, 0o600)
		}, []string{"0 bytes"}},
		{"directory", func(t *testing.T, path string) {
			os.Mkdir(path, 0o700)
		}, []string{"is a directory, not a regular file"}},
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("cannot make a FIFO here: %v", err)
			}
		}, []string{"is a named pipe, not a regular file"}},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			if _, err := os.Stat("/dev/zero"); err != nil {
				t.Skipf("no /dev/zero: %v", err)
			}
			os.Symlink("/dev/zero", path)
		}, []string{"is a character device, not a regular file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.key")
			c.make(t, path)
			err := within(t, "LoadKey", func() error {
				_, _, err := LoadKey(path)
				return err
			})
			if err == nil {
				t.Fatal("LoadKey accepted it")
			}
			for _, want := range append([]string{path, keyHint}, c.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			if c.name == "fifo" || c.name == "directory" {
				if !errors.Is(err, ErrNotRegular) {
					t.Errorf("%v does not wrap ErrNotRegular", err)
				}
			}
		})
	}
}

// keyHint is what every refusal names as a way out.
const keyHint = KeyFileEnv

func TestLoadKeyFollowsSymlinkToRegularFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.key")
	key, _, err := LoadKey(real)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	got, created, err := LoadKey(link)
	if err != nil || created || !bytes.Equal(got, key) {
		t.Fatalf("LoadKey through a link to a key: created %v, %v", created, err)
	}
}

func TestKeyID(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	id := KeyID(k1)
	if len(id) != 16 {
		t.Errorf("KeyID = %q, want 16 hex digits", id)
	}
	if _, err := hex.DecodeString(id); err != nil {
		t.Errorf("KeyID = %q is not hex", id)
	}
	if KeyID(k1) != id || KeyID(k2) == id {
		t.Error("KeyID is not a function of the key")
	}
	if strings.Contains(hex.EncodeToString(k1), id) {
		t.Error("KeyID gives the key away")
	}
}

func TestKeyPath(t *testing.T) {
	t.Setenv(KeyFileEnv, "")
	t.Setenv("XDG_CONFIG_HOME", "/config-home")
	t.Setenv("HOME", "/home-dir")
	got, err := KeyPath()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.UserConfigDir()
	if want := filepath.Join(cfg, "aml", "journal.key"); got != want {
		t.Errorf("KeyPath() = %q, want %q", got, want)
	}
	t.Setenv(KeyFileEnv, "keys/mine.key")
	got, err = KeyPath()
	wd, _ := os.Getwd()
	if err != nil || got != filepath.Join(wd, "keys", "mine.key") {
		t.Errorf("KeyPath() with %s=keys/mine.key = %q, %v; want it absolute", KeyFileEnv, got, err)
	}
}
