package eval

import (
	"fmt"
	"path"
	"strings"
)

// Sandbox scopes execution: the outermost sandbox() of a subtree acquires
// one lease from its provider; nested ones are views of that lease that
// may only narrow access and root and move the working directory.
type Sandbox struct {
	Children []any
	// Provider selects the provider of the outermost sandbox; nil uses the
	// runtime's SandboxProvider. A nested sandbox may not set it.
	Provider SandboxProvider
	// Access is ReadOnly or ReadWrite; "" means read-only for the
	// outermost sandbox and the parent's access for a nested one.
	Access Access
	// Root is the logical root relative to the parent's root; "" means ".".
	Root string
	// Cwd is the logical working directory relative to Root; "" means the
	// default (the workspace's cwd for an outer sandbox at the workspace
	// root, else ".").
	Cwd      string
	Position Position
}

// SavePolicy is when and what a workspace publishes.
type SavePolicy struct {
	// On is "success" (publish only when the subtree succeeded) or
	// "always" (also after a failure; never after cancellation).
	On      string
	Include []string
	Exclude []string
	// Gitignore applies the tree's .gitignore files when Include is nil.
	Gitignore bool
	// Retention is the number of revisions kept, counting the new one.
	Retention int
}

// DefaultSavePolicy is save=True: publish on success, honour .gitignore,
// keep one revision.
func DefaultSavePolicy() *SavePolicy {
	return &SavePolicy{On: "success", Gitignore: true, Retention: 1}
}

// Workspace scopes durable files: it acquires and materializes a
// revision before its children run, saves by its policy and releases after
// them. At most one workspace() runs per evaluation and never inside a
// sandbox.
type Workspace struct {
	Children []any
	// ID is the durable identity; "" generates a random (version 4) UUID.
	ID string
	// Provider overrides the runtime's WorkspaceProvider.
	Provider WorkspaceProvider
	// Cwd is the logical working directory of descendants; "" means ".".
	Cwd string
	// Load selects what to materialize; nil starts empty (restore=False).
	Load *WorkspaceLoad
	// Save is the publication policy; nil never saves.
	Save *SavePolicy
	// NoLock skips the long-lived writer lock.
	NoLock bool
	// WriteConcurrency is "serial" (writable sibling sandboxes take turns)
	// or "parallel"; "" means serial.
	WriteConcurrency string
	Position         Position
}

// File replaces one complete UTF-8 file in the nearest active filesystem
// (the sandbox's, else the workspace materialization) with its resolved
// children, or with the application file Src. It contributes no text.
type File struct {
	Children []any
	// Path is the logical destination.
	Path string
	// Src, when set, is an application file (resolved from the runtime's
	// Cwd) copied instead of the children.
	Src      string
	Position Position
}

// Script runs one command on the host, or in the active sandbox when one
// encloses it, and contributes its standard output. Either Command (with
// literal Args, no shell) or Shell (with the resolved children as source)
// is set.
type Script struct {
	Children []any
	Command  string
	Args     []string
	// Shell is "sh", "bash" or "node".
	Shell string
	// Cwd is a logical directory: relative to the runtime's Cwd on the
	// host, to the sandbox root inside a sandbox.
	Cwd string
	// TimeoutMS bounds the command; 0 means none.
	TimeoutMS int64
	Position  Position
}

// Kind implements Node.
func (*Sandbox) Kind() string { return "sandbox" }

// Kind implements Node.
func (*Workspace) Kind() string { return "workspace" }

// Kind implements Node.
func (*File) Kind() string { return "file" }

// Kind implements Node.
func (*Script) Kind() string { return "script" }

// Pos implements Node.
func (n *Sandbox) Pos() Position { return n.Position }

// Pos implements Node.
func (n *Workspace) Pos() Position { return n.Position }

// Pos implements Node.
func (n *File) Pos() Position { return n.Position }

// Pos implements Node.
func (n *Script) Pos() Position { return n.Position }

// CheckLogicalPath validates a portable path: relative, slash-separated,
// without empty, "." or ".." segments (a lone "." means the root when
// allowDot is set). It returns the cleaned path.
func CheckLogicalPath(p string, allowDot bool) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path is empty")
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path %q contains a backslash: use forward slashes", p)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	case path.IsAbs(p) || (len(p) >= 2 && p[1] == ':'):
		return "", fmt.Errorf("path %q is absolute: paths are relative to the active root", p)
	}
	if p == "." {
		if allowDot {
			return ".", nil
		}
		return "", fmt.Errorf("path %q names the root itself", p)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		switch seg {
		case "..":
			return "", fmt.Errorf("path %q leaves its root through ..", p)
		case "", ".":
			return "", fmt.Errorf("path %q has an empty or . segment", p)
		}
	}
	return path.Clean(p), nil
}
