package eval

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// This file holds the rules of the workspace contract's values: the
// Starlark workspace() builtin applies them when it builds the node, the
// evaluator's static check applies them to Go-built nodes before any
// child runs, and workspace providers apply the same functions to the
// requests they receive. One rule, one function.

// validateGlobs reports the first pattern that is not a normalized
// relative forward-slash glob without negation: non-empty, not starting
// with "/" or "!", without backslash or NUL, with no empty, "." or ".."
// segments, and valid doublestar syntax. A pattern selects a path when it
// matches the path or one of its ancestor directories.
func validateGlobs(patterns []string) error {
	for _, p := range patterns {
		bad := p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "!") || strings.ContainsAny(p, "\\\x00") || !doublestar.ValidatePattern(p)
		if !bad {
			for _, seg := range strings.Split(p, "/") {
				if seg == "" || seg == "." || seg == ".." {
					bad = true
					break
				}
			}
		}
		if bad {
			return fmt.Errorf("invalid workspace glob %q: use a normalized relative forward-slash pattern without negation", p)
		}
	}
	return nil
}

// validateWorkspaceID reports whether id can name a workspace: a
// non-empty, trimmed UTF-8 string.
func validateWorkspaceID(id string) error {
	if id == "" || strings.TrimSpace(id) != id || !utf8.ValidString(id) {
		return fmt.Errorf("workspace id %q must be a non-empty trimmed UTF-8 string", id)
	}
	return nil
}

// Validate reports the first invalid field of the policy, naming it as
// the save= dict of workspace() does.
func (p *SavePolicy) Validate() error {
	if p.On != "success" && p.On != "always" {
		return fmt.Errorf(`save["on"] must be "success" or "always", got %q`, p.On)
	}
	if err := validateGlobs(p.Include); err != nil {
		return fmt.Errorf(`save["include"]: %w`, err)
	}
	if err := validateGlobs(p.Exclude); err != nil {
		return fmt.Errorf(`save["exclude"]: %w`, err)
	}
	if p.Retention < 0 {
		return fmt.Errorf(`save["retention"] must be a positive integer (it counts the new revision), got %d`, p.Retention)
	}
	return nil
}

// Validate reports the first invalid field of the selection, naming it as
// the restore= dict of workspace() does.
func (l *WorkspaceLoad) Validate() error {
	if strings.TrimSpace(l.Revision) != l.Revision {
		return fmt.Errorf(`restore["revision"] must be "current" or a revision id, got %q`, l.Revision)
	}
	if err := validateGlobs(l.Include); err != nil {
		return fmt.Errorf(`restore["include"]: %w`, err)
	}
	if err := validateGlobs(l.Exclude); err != nil {
		return fmt.Errorf(`restore["exclude"]: %w`, err)
	}
	return nil
}

// RetentionOrDefault returns the retention a save uses: Retention, or 1
// (only the new revision) when it is 0.
func (r SavePolicy) RetentionOrDefault() int {
	if r.Retention == 0 {
		return 1
	}
	return r.Retention
}

// Validate reports an invalid save request: a malformed include or
// exclude glob, or a negative retention (On is the evaluator's business
// and is not checked). Workspace providers call it on the requests they
// receive.
func (r WorkspaceSaveRequest) Validate() error {
	if r.Retention < 0 {
		return fmt.Errorf("retention %d must be positive (it counts the new revision)", r.Retention)
	}
	if err := validateGlobs(r.Include); err != nil {
		return err
	}
	return validateGlobs(r.Exclude)
}

// Validate reports an invalid acquire request: an id that is not a
// non-empty trimmed UTF-8 string, or an invalid restore selection.
// Workspace providers call it on the requests they receive.
func (r *WorkspaceAcquireRequest) Validate() error {
	if err := validateWorkspaceID(r.ID); err != nil {
		return err
	}
	if r.Load != nil {
		return r.Load.Validate()
	}
	return nil
}

// Validate reports the first invalid field of the node: its id, cwd,
// write concurrency, restore selection and save policy. The workspace()
// builtin calls it when it builds the node, and the evaluator before any
// child of a Go-built node runs.
func (w *Workspace) Validate() error {
	if w.ID != "" {
		if err := validateWorkspaceID(w.ID); err != nil {
			return err
		}
	}
	if w.Cwd != "" {
		if _, err := CheckLogicalPath(w.Cwd, true); err != nil {
			return fmt.Errorf("cwd: %w", err)
		}
	}
	switch w.WriteConcurrency {
	case "", "serial", "parallel":
	default:
		return fmt.Errorf(`write_concurrency must be "serial" or "parallel", got %q`, w.WriteConcurrency)
	}
	if w.Load != nil {
		if err := w.Load.Validate(); err != nil {
			return err
		}
	}
	if w.Save != nil {
		if err := w.Save.Validate(); err != nil {
			return err
		}
	}
	return nil
}
