package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestString(t *testing.T) {
	r := New("supersecretvalue", "secret", "abc", "", "secret")
	for _, c := range []struct{ in, want string }{
		{"exit 3: supersecretvalue", "exit 3: " + Placeholder},
		// The longer secret is replaced whole, not around the shorter one.
		{"a supersecretvalue and a secret", "a " + Placeholder + " and a " + Placeholder},
		// Values shorter than MinLen are not secrets.
		{"abc", "abc"},
		{"nothing here", "nothing here"},
	} {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := New().String("secret"); got != "secret" {
		t.Errorf("an empty Redactor changed %q to %q", "secret", got)
	}
}

func TestError(t *testing.T) {
	r := New("hunter22")
	if r.Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
	clean := errors.New("no secret")
	if r.Error(clean) != clean {
		t.Error("an error without a secret is not returned as it is")
	}
	cause := fmt.Errorf("login with hunter22: %w", fs.ErrPermission)
	err := r.Error(cause)
	if got, want := err.Error(), "login with "+Placeholder+": permission denied"; got != want {
		t.Errorf("redacted error %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, cause) {
		t.Error("the redacted error does not wrap its cause")
	}
	var re *Error
	if !errors.As(err, &re) || re.Redact("trace: hunter22") != "trace: "+Placeholder {
		t.Errorf("the redacted error does not redact other text with its secrets: %v", err)
	}
}
