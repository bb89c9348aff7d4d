// Package option is the one rule for the string options of provider
// constructors and their Starlark factories, as the AML provider pages
// state it: an option string is a non-empty, trimmed value without NUL
// characters.
//
// In Go options structs the empty string means "unset" (use the
// default), so String accepts it; a Starlark keyword the author passed
// explicitly is never "unset", so Set rejects it. Every function is safe
// for concurrent use.
package option

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Check validates one option of factory (the constructor or Starlark
// factory name used in the error): "" is accepted as unset; any other
// value must equal its trimmed form and contain no NUL byte. The error
// quotes the value unless secret is set.
func Check(factory, name, value string, secret bool) error {
	if value == "" || valid(value) {
		return nil
	}
	return bad(factory, name, value, secret)
}

// CheckGiven validates an option the author passed explicitly: it must be
// non-empty as well as trimmed and free of NUL bytes.
func CheckGiven(factory, name, value string, secret bool) error {
	if valid(value) && value != "" {
		return nil
	}
	return bad(factory, name, value, secret)
}

// CheckAll validates several options with Check and reports the first bad
// one in name order; values of the options named in secret are not quoted.
func CheckAll(factory string, values map[string]string, secret ...string) error {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if err := Check(factory, name, values[name], slices.Contains(secret, name)); err != nil {
			return err
		}
	}
	return nil
}

func valid(v string) bool {
	return strings.TrimSpace(v) == v && strings.IndexByte(v, 0) < 0
}

func bad(factory, name, value string, secret bool) error {
	const rule = "must be a non-empty, trimmed string without NUL bytes"
	switch {
	case secret && value == "":
		return fmt.Errorf("%s: %s is empty: give the credential (%s = env(\"NAME\") with NAME set in the environment or a .env file)", factory, name, name)
	case secret:
		return fmt.Errorf("%s: %s %s", factory, name, rule)
	case value == "":
		return fmt.Errorf("%s: %s %s, got an empty string", factory, name, rule)
	}
	return fmt.Errorf("%s: %s %s, got %q", factory, name, rule, value)
}
