package acp

import (
	"maps"
	"slices"
	"strings"
)

// redacted replaces a secret in text the agent printed or answered.
const redacted = "[redacted]"

// minSecret is the shortest value that is redacted: shorter values
// ("1", "true") are not credentials, and replacing them would garble
// every message.
const minSecret = 4

// redactor removes the values AML itself passed to the agent process
// (env=, profile credentials such as API keys and tokens) from what the
// agent prints: stderr tails and protocol problems in errors and traces,
// and error answers. Other output of the agent is the agent's
// responsibility. It is immutable and safe for concurrent use.
type redactor struct {
	// secrets are the values, longest first, so that a secret containing
	// another is replaced whole.
	secrets []string
}

// newRedactor redacts the values of envs and the values in extra.
func newRedactor(extra []string, envs ...map[string]string) redactor {
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= minSecret {
			seen[v] = true
		}
	}
	for _, m := range envs {
		for _, v := range m {
			add(v)
		}
	}
	for _, v := range extra {
		add(v)
	}
	secrets := slices.Collect(maps.Keys(seen))
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return redactor{secrets: secrets}
}

// String returns s with every secret replaced.
func (r redactor) String(s string) string {
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return s
}

// Error returns err unchanged when its text holds no secret, else an
// error with the redacted text that still wraps err for errors.Is and
// errors.As.
func (r redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
