package starlib_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// vault has a builtin with a credential parameter, as the ACP profiles'
// api_key.
var vault = &starlib.Extension{
	Name: "vault",
	Builtins: []*starlib.Builtin{{
		Name:    "vault_login",
		Group:   "runtime",
		Doc:     "Logs in.",
		Params:  []starlib.Param{{Name: "token", Type: "str", Secret: true, Doc: "The token."}},
		Returns: "None",
		Impl:    func(*starlib.Call) (starlark.Value, error) { return starlark.None, nil },
	}},
}

func TestWorkflowSecrets(t *testing.T) {
	env := map[string]string{"TOP": "top-level-value", "INNER": "component-value", "SHORT": "ab", "EMPTY": ""}
	src := []byte(`
top = env("TOP")
short = env("SHORT")
empty = env("EMPTY")
missing = env("MISSING", "the-default")
vault_login(token = "s3cr3t-token")

def _main():
    return env("INNER")

main = component(_main)
`)
	w, err := starlib.LoadFile("secrets.star", starlib.LoadOptions{
		Source:     src,
		Env:        func(name string) (string, bool) { v, ok := env[name]; return v, ok },
		Extensions: []*starlib.Extension{vault},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"top-level-value", "s3cr3t-token", "ab"}
	if got := w.Secrets(); !slices.Equal(got, want) {
		t.Errorf("Secrets after loading = %q, want %q (values read with env() and credential arguments, longest first; no defaults, no empty values)", got, want)
	}
	if _, err := w.Evaluate(context.Background(), "main", eval.Options{}); err != nil {
		t.Fatal(err)
	}
	want = []string{"component-value", "top-level-value", "s3cr3t-token", "ab"}
	if got := w.Secrets(); !slices.Equal(got, want) {
		t.Errorf("Secrets after evaluating = %q, want %q (env() in component code too)", got, want)
	}
	// Safe for concurrent use with evaluations.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() { defer wg.Done(); w.Evaluate(context.Background(), "main", eval.Options{}) }()
		go func() { defer wg.Done(); w.Secrets() }()
	}
	wg.Wait()
}

// keyed is the digest of an env() value under key.
func keyed(key []byte, marker string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(marker))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:9])
}

func TestEnvDigestKey(t *testing.T) {
	src := []byte(`
token = env("TOKEN")
unset = env("UNSET")

def _main():
    return env("TOKEN")

main = component(_main)
`)
	lookup := func(name string) (string, bool) {
		if name == "TOKEN" {
			return "1234", true
		}
		return "", false
	}
	digests := func(key []byte) []string {
		t.Helper()
		w, err := starlib.LoadFile("digest.star", starlib.LoadOptions{Source: src, Env: lookup, EnvDigestKey: key})
		if err != nil {
			t.Fatal(err)
		}
		j := eval.NewMemoryJournal()
		if _, err := w.Evaluate(context.Background(), "main", eval.Options{}, eval.EvaluateOptions{Journal: j}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range j.Effects() {
			if e.Kind == "read" {
				out = append(out, eval.RequestFields(e.Request)["value"])
			}
		}
		return out
	}
	// Without a key: SHA-256 (eval.Fingerprint), as before keys existed.
	plain := []string{eval.Fingerprint("=1234"), eval.Fingerprint("\x00unset"), eval.Fingerprint("=1234")}
	if got := digests(nil); !slices.Equal(got, plain) {
		t.Errorf("unkeyed digests %q, want %q", got, plain)
	}
	// With a key: HMAC-SHA256 under it, encoded as Fingerprint encodes.
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	want := []string{keyed(k1, "=1234"), keyed(k1, "\x00unset"), keyed(k1, "=1234")}
	got := digests(k1)
	if !slices.Equal(got, want) {
		t.Errorf("keyed digests %q, want %q", got, want)
	}
	if len(got[0]) != len(plain[0]) {
		t.Errorf("a keyed digest has %d characters, Fingerprint %d", len(got[0]), len(plain[0]))
	}
	if other := digests(k2); slices.Equal(other, got) || strings.Contains(strings.Join(other, ","), "1234") {
		t.Errorf("another key gives the same digests %q", other)
	}
}
