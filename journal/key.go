package journal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aml-go/aml/internal/durable"
)

// KeyFileEnv is the environment variable that names the journal key
// file instead of the default (see KeyPath).
const KeyFileEnv = "AML_JOURNAL_KEY_FILE"

// KeySize is the length of a journal key in bytes.
const KeySize = 32

// KeyPath returns where this machine's journal key is kept: the file
// $AML_JOURNAL_KEY_FILE names when it is set (made absolute), else
// aml/journal.key in os.UserConfigDir (on Linux $XDG_CONFIG_HOME, else
// ~/.config). It never creates anything. It is safe for concurrent use.
func KeyPath() (string, error) {
	if p := os.Getenv(KeyFileEnv); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", KeyFileEnv, p, err)
		}
		return abs, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("cannot find where to keep the journal key: %w; set %s to a file outside the journal directory", err, KeyFileEnv)
	}
	return filepath.Join(dir, "aml", "journal.key"), nil
}

// LoadKey returns the journal key in the file at path, creating the file
// with a new random key when there is none: KeySize bytes from
// crypto/rand, in a file made 0600 (its missing directories 0700).
// Creation is atomic, and concurrent first uses, in this process or
// others, agree on one key: the key is written to a temporary file in
// the same directory, fsynced and hard-linked to path, which fails when
// another got there first; every caller then reads back what path
// holds. created reports that this call made the file.
//
// A file that is not a regular file (a named pipe, a device: it is
// opened without blocking, and a symbolic link is followed) or does not
// hold exactly KeySize bytes is refused with an error naming it; the
// former wraps ErrNotRegular. It is safe for concurrent use.
//
// The key keys the digests of env() values that a journal records
// (starlib.LoadOptions.EnvDigestKey); it is kept outside the journal
// directory, so that a copy of a journal does not carry it. KeyID names
// it in a run's metadata.
func LoadKey(path string) (key []byte, created bool, err error) {
	key, err = readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	if created, err = createKey(path); err != nil {
		return nil, false, err
	}
	key, err = readKey(path)
	return key, created, err
}

// readKey reads the key file at path.
func readKey(path string) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, true)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("cannot read the journal key: %w; %s", err, keyFix(path))
	}
	defer f.Close()
	buf := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, buf)
	switch {
	case err == nil:
		return nil, fmt.Errorf("the journal key %s holds more than %d bytes, so it is not a journal key; %s", path, KeySize, keyFix(path))
	case errors.Is(err, io.ErrUnexpectedEOF) && n == KeySize:
		return buf[:KeySize], nil
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, fmt.Errorf("the journal key %s holds %d bytes, not %d, so it is not a journal key; %s", path, n, KeySize, keyFix(path))
	}
	return nil, fmt.Errorf("cannot read the journal key %s: %w", path, err)
}

// keyFix says how to repair the key file at path.
func keyFix(path string) string {
	return fmt.Sprintf("restore the key file from where it was copied from, or move %s away so that a new key is made (runs recorded with the old key then resume without checking their env() values), or set %s to another file", path, KeyFileEnv)
}

// createKey makes the key file at path unless it exists, and reports
// whether this call made it.
func createKey(path string) (bool, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return false, fmt.Errorf("cannot create the directory of the journal key: %w; set %s to a file in a directory that can be written", err, KeyFileEnv)
	}
	key := make([]byte, KeySize)
	rand.Read(key)
	// Written exclusively, by a link that never replaces what is there:
	// of concurrent first uses, one wins and the others read its key.
	err := durable.Write(path, key, durable.Options{Perm: 0o600, Umask: true, Temp: ".tmp-" + filepath.Base(path) + "-*", Exclusive: true})
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot create the journal key: %w", err)
	}
	return true, nil
}

// KeyID returns the id of a journal key: the first 8 bytes, in hex, of
// HMAC-SHA256 under the key of a fixed text. It names the key (in a
// run's recorded options, in messages) without giving it away. It is
// safe for concurrent use.
func KeyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("aml journal key id"))
	return hex.EncodeToString(m.Sum(nil)[:8])
}
