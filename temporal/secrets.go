package temporal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/internal/redact"
	"github.com/aml-go/aml/starlib"
)

// Secrets in workflow code. Temporal history is readable by anyone with
// access to the namespace, so an env() value never enters it:
//
//   - env() in workflow code reads the variable on the worker that first
//     runs the read, and history records the value sealed (AES-GCM under
//     a key derived from the workers' shared key, in a
//     workflow.SideEffect): a worker that replays the run opens the
//     record, so the run reads the same value whichever worker drives it,
//     and a worker without the key cannot drive it.
//   - Before an effect is scheduled, every value env() returned (of at
//     least redact.MinLen bytes) is replaced in what the activity carries
//     by a token that names the variable; the worker puts its own value
//     back, runs the effect, and turns the value back into the token in
//     what it returns. The workflow puts its value back in the result.
//   - A run's error is redacted as aml run redacts it.

// envToken is the placeholder of variable name in what activities carry.
func envToken(name string) string { return "\x00aml-env:" + name + "\x00" }

// envTokenPrefix starts every token.
const envTokenPrefix = "\x00aml-env:"

// sealer replaces the env() values a run read by their tokens, and back.
// It belongs to one run's workflow code (or one activity), so it needs no
// lock.
type sealer struct {
	names  map[string]string // value -> variable
	values []string          // longest first
}

// add notes that variable name has value v.
func (s *sealer) add(name, v string) {
	if len(v) < redact.MinLen {
		return
	}
	if s.names == nil {
		s.names = map[string]string{}
	}
	if _, ok := s.names[v]; ok {
		return
	}
	s.names[v] = name
	s.values = append(s.values, v)
	slices.SortFunc(s.values, func(a, b string) int { return len(b) - len(a) })
}

// seal replaces the values in text by their tokens.
func (s *sealer) seal(text string) string {
	for _, v := range s.values {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, envToken(s.names[v]))
		}
	}
	return text
}

// unseal replaces tokens in text by the values of lookup; an unknown
// variable is an error naming it.
func unseal(text string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(text, envTokenPrefix) {
		return text, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(text, envTokenPrefix)
		if i < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		b.WriteString(text[:i])
		rest := text[i+len(envTokenPrefix):]
		j := strings.IndexByte(rest, 0)
		if j < 0 {
			b.WriteString(text[i:])
			return b.String(), nil
		}
		name := rest[:j]
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("the run read environment variable %s, which this worker does not have: give every worker the same environment", name)
		}
		b.WriteString(v)
		text = rest[j+1:]
	}
}

// envBox seals and opens the env() values that history records, with
// AES-GCM under a key derived from the workers' shared key.
type envBox struct{ aead cipher.AEAD }

func newEnvBox(key []byte) envBox {
	if key == nil {
		key = []byte("aml-temporal-env")
	}
	k := sha256.Sum256(append([]byte("aml temporal env\x00"), key...))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return envBox{aead}
}

// envRecord is what history holds of one env() read.
type envRecord struct {
	Sealed string `json:"sealed"`
}

func (b envBox) seal(v string, set bool) (envRecord, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return envRecord{}, err
	}
	plain := "\x00unset"
	if set {
		plain = "=" + v
	}
	return envRecord{Sealed: base64.RawStdEncoding.EncodeToString(b.aead.Seal(nonce, nonce, []byte(plain), nil))}, nil
}

func (b envBox) open(r envRecord) (string, bool, error) {
	raw, err := base64.RawStdEncoding.DecodeString(r.Sealed)
	n := b.aead.NonceSize()
	if err != nil || len(raw) < n {
		return "", false, errors.New("the run's record of an env() value is damaged")
	}
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], nil)
	if err != nil {
		return "", false, errors.New("this worker cannot open the run's record of an env() value: give every worker the same journal key (AML_JOURNAL_KEY_FILE)")
	}
	if string(plain) == "\x00unset" {
		return "", false, nil
	}
	return strings.TrimPrefix(string(plain), "="), true, nil
}

// workflowEnv is env() in workflow code (see the comment at the top):
// the worker that first runs the read looks the variable up, and history
// records the value sealed, so that a worker that replays the run reads
// the same value whatever its own environment holds.
//
// A value an earlier execution of the run read (carried) is read again as
// it was; every record is kept in log for the next execution.
func workflowEnv(wctx workflow.Context, lookup func(string) (string, bool), key []byte, s *sealer, carried, log map[string]envRecord) func(string) (string, bool) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	box := newEnvBox(key)
	return func(name string) (string, bool) {
		rec, ok := carried[name]
		if !ok {
			err := workflow.SideEffect(wctx, func(workflow.Context) any {
				v, ok := lookup(name)
				r, err := box.seal(v, ok)
				if err != nil {
					panic(fmt.Sprintf("env(%q): %v", name, err))
				}
				return r
			}).Get(&rec)
			if err != nil {
				panic(fmt.Sprintf("env(%q): %v", name, err))
			}
		}
		if log != nil {
			log[name] = rec
		}
		v, ok, err := box.open(rec)
		if err != nil {
			// The evaluation fails here, which does not match the run's
			// history: the workflow task fails, is tried again, and the
			// run waits until a worker with the right key takes it. The
			// worker's log says why.
			msg := fmt.Sprintf("env(%q): %v", name, err)
			workflow.GetLogger(wctx).Error(msg)
			panic(msg)
		}
		if ok {
			s.add(name, v)
		}
		return v, ok
	}
}

// envDigestKey keys the digests of env() values that the run's journal
// records (starlib.LoadOptions.EnvDigestKey): the same on every worker
// that has the workers' shared key, so that a continued run compares them.
func envDigestKey(key []byte) []byte {
	k := sha256.Sum256(append([]byte("aml temporal env digest\x00"), key...))
	return k[:]
}

// sealFactory copies a provider's factory call with the env() values its
// arguments hold replaced by their tokens.
func sealFactory(fc *starlib.FactoryCall, seal *sealer) *starlib.FactoryCall {
	out := &starlib.FactoryCall{Builtin: fc.Builtin, Pos: fc.Pos}
	for _, a := range fc.Args {
		out.Args = append(out.Args, mapStrings(a, seal.seal))
	}
	if fc.Kwargs != nil {
		out.Kwargs = map[string]any{}
		for k, v := range fc.Kwargs {
			out.Kwargs[k] = mapStrings(v, seal.seal)
		}
	}
	return out
}

// openFactory fills the env() tokens of a travelled factory call with
// this worker's values.
func openFactory(fc *starlib.FactoryCall, open func(string) (string, error)) (*starlib.FactoryCall, error) {
	var err error
	fill := func(s string) string {
		if err != nil {
			return s
		}
		var o string
		o, err = open(s)
		return o
	}
	out := &starlib.FactoryCall{Builtin: fc.Builtin, Pos: fc.Pos}
	for _, a := range fc.Args {
		out.Args = append(out.Args, mapStrings(a, fill))
	}
	if fc.Kwargs != nil {
		out.Kwargs = map[string]any{}
		for k, v := range fc.Kwargs {
			out.Kwargs[k] = mapStrings(v, fill)
		}
	}
	return out, err
}

// mapStrings copies JSON-like data with f applied to every string in it,
// the keys of maps included.
func mapStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapStrings(e, f)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[f(k)] = mapStrings(e, f)
		}
		return out
	}
	return v
}
