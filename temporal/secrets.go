package temporal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/internal/redact"
)

// Secrets in workflow code. Temporal history is readable by anyone with
// access to the namespace, so an env() value never enters it:
//
//   - env() in workflow code reads the variable on the worker that runs
//     the workflow task, and history records only its keyed digest (a
//     workflow.SideEffect). A worker that replays the run reads the
//     variable itself and refuses to go on when its digest differs: every
//     worker must have the same environment (and the same digest key).
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

// envDigest is the keyed digest of a variable's value (or of its absence)
// that history records.
func envDigest(key []byte, v string, set bool) string {
	marker := "=" + v
	if !set {
		marker = "\x00unset"
	}
	if key == nil {
		key = []byte("aml-temporal-env")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(marker))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:12])
}

// workflowEnv is env() in workflow code (see the comment at the top).
func workflowEnv(wctx workflow.Context, lookup func(string) (string, bool), key []byte, s *sealer) func(string) (string, bool) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		digest := envDigest(key, v, ok)
		var recorded string
		if err := workflow.SideEffect(wctx, func(workflow.Context) any { return digest }).Get(&recorded); err != nil {
			panic(fmt.Sprintf("env(%q): %v", name, err))
		}
		if recorded != digest {
			// The evaluation fails here, which does not match the run's
			// history: the workflow task fails, is tried again, and the
			// run waits until a worker with the right environment takes
			// it. The worker's log says why.
			msg := fmt.Sprintf("env(%q) differs on this worker from what the run read on another: give every worker the same environment and the same journal key", name)
			workflow.GetLogger(wctx).Error(msg)
			panic(msg)
		}
		if ok {
			s.add(name, v)
		}
		return v, ok
	}
}
