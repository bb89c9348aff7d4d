// Package redact replaces secret values in text and errors: the values of
// credentials and environment variables that AML passed on, which a
// process may echo back in what it prints.
//
// The rule, shared by every place that redacts: a value of at least
// MinLen bytes is replaced by Placeholder wherever it occurs, longer
// values first so that a value containing another is replaced whole.
package redact

import (
	"slices"
	"strings"
)

// Placeholder replaces a secret.
const Placeholder = "[redacted]"

// MinLen is the length of the shortest value that is redacted: shorter
// values ("1", "true") are not credentials, and replacing them would
// garble every message.
const MinLen = 4

// Redactor replaces a fixed set of values. The zero Redactor replaces
// nothing. A Redactor is immutable and safe for concurrent use.
type Redactor struct {
	// secrets are the values, longest first.
	secrets []string
}

// New returns a Redactor of values; those shorter than MinLen, and
// duplicates, are dropped.
func New(values ...string) Redactor {
	var secrets []string
	for _, v := range values {
		if len(v) >= MinLen {
			secrets = append(secrets, v)
		}
	}
	slices.SortFunc(secrets, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return Redactor{secrets: slices.Compact(secrets)}
}

// String returns s with every secret replaced by Placeholder.
func (r Redactor) String(s string) string {
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Placeholder)
		}
	}
	return s
}

// Error returns err unchanged when its text holds no secret, else an
// *Error with the redacted text that still wraps err for errors.Is and
// errors.As.
func (r Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &Error{msg: red, err: err, r: r}
	}
	return err
}

// Error is an error whose text had secrets redacted. The errors it wraps
// keep theirs: code that prints more of a wrapped error than its text (a
// Starlark backtrace, say) redacts that with Redact. It is immutable and
// safe for concurrent use.
type Error struct {
	msg string
	err error
	r   Redactor
}

// Error returns the redacted text.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the error that was redacted.
func (e *Error) Unwrap() error { return e.err }

// Redact returns s with the secrets that were redacted from this error
// replaced too.
func (e *Error) Redact(s string) string { return e.r.String(s) }
