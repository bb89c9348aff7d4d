package eval

import (
	"fmt"
	"strconv"
)

// Position is the authored source location of a node: the file, the
// 1-based line and the 1-based column (in runes) of the call that built it.
// The zero Position means "unknown".
type Position struct {
	File string
	Line int32
	Col  int32
}

// IsValid reports whether the position names a line.
func (p Position) IsValid() bool { return p.Line > 0 }

// String formats the position as file:line:col, omitting the parts that
// are unknown.
func (p Position) String() string {
	file := p.File
	if file == "" {
		file = "<unknown>"
	}
	if p.Line <= 0 {
		return file
	}
	if p.Col <= 0 {
		return file + ":" + strconv.Itoa(int(p.Line))
	}
	return file + ":" + strconv.Itoa(int(p.Line)) + ":" + strconv.Itoa(int(p.Col))
}

// Node is one immutable AML node. Nodes are built by the Starlark builtins
// (or directly by Go code) and are never changed afterwards, so a node tree
// may be shared by any number of goroutines.
//
// A node's children are renderable values: string, bool, nil, the Go
// integer and float types, []any of renderables, []string, and Node.
type Node interface {
	// Kind is the builtin name of the node ("agent", "block", ...).
	Kind() string
	// Pos is the source position of the call that built the node.
	Pos() Position
}

// Permissions are the native harness controls an agent asks its provider
// for. An active sandbox may narrow them; they are requests, not confinement.
type Permissions struct {
	// Filesystem is "read-only" or "read-write".
	Filesystem Access
	// Network allows network access.
	Network bool
	// Shell allows shell command execution.
	Shell bool
}

// DefaultPermissions are the permissions of an agent that sets none:
// read-write filesystem, network and shell enabled.
func DefaultPermissions() Permissions {
	return Permissions{Filesystem: ReadWrite, Network: true, Shell: true}
}

// Agent runs one provider session after its prompt, system text and
// follow-ups have been resolved (a post-order consumer).
type Agent struct {
	// Children are the initial prompt content and agent-scoped nodes
	// (system, follow_up, ...).
	Children []any
	// Provider overrides the runtime's default agent provider; nil uses it.
	Provider AgentProvider
	// Model is passed through to the provider; "" means the provider default.
	Model string
	// System is fixed system text placed after the runtime system text and
	// before system() children.
	System string
	// Name is diagnostic metadata for traces and errors; never sent to the
	// provider as prompt text.
	Name string
	// Schema, when set, requests a structured result: the provider's
	// structured value is validated and rendered as canonical JSON text.
	Schema *Schema
	// TimeoutMS bounds the provider session once it holds a scheduler slot;
	// 0 means no timeout.
	TimeoutMS int64
	// Cwd is an agent-local working directory inside the active sandbox.
	// It requires an enclosing sandbox.
	Cwd string
	// Permissions are the requested native controls; nil means
	// DefaultPermissions.
	Permissions *Permissions
	// Budget, when set, bounds what this one session spends; it counts
	// toward the budgets around it.
	Budget *Budget
	// Position is where the node was authored.
	Position Position
}

// System routes its resolved text into the system channel of the nearest
// enclosing Agent.
type System struct {
	Children []any
	Position Position
}

// FollowUp adds one later turn to the nearest enclosing Agent's session.
type FollowUp struct {
	Children []any
	Position Position
}

// Block adds exact blank-line separation around its children and, with a
// Tag, wraps them in an XML-style section. It creates no scope.
type Block struct {
	Children []any
	// Tag is the authored section name; it is normalized with
	// normalizeTag when rendered. "" means untagged.
	Tag      string
	Position Position
}

// Fragment groups children without adding text or a boundary. It behaves
// exactly like a list and does not count toward max_depth.
type Fragment struct {
	Children []any
	Position Position
}

// Parallel evaluates each branch concurrently in the current evaluation
// domain, waits for all of them, and renders their text in authored order.
type Parallel struct {
	// Branches are the branches; lists are flattened and nil/bool values
	// contribute no branch.
	Branches []any
	Position Position
}

// BudgetScope bounds what its children spend: every agent session and
// tool call inside counts toward Budget and toward the budgets around it.
// Its children are evaluated as one nested evaluation (like a parallel()
// branch), so that its wall time bound can stop them.
type BudgetScope struct {
	Children []any
	Budget   Budget
	Position Position
}

// Kind implements Node.
func (*BudgetScope) Kind() string { return "budget" }

// Pos implements Node.
func (n *BudgetScope) Pos() Position { return n.Position }

// Component is a lazily evaluated function component.
type Component struct {
	// Name is the component's display name used in traces and errors.
	Name string
	// Fn is the body, called at most once per evaluation of the node: it
	// runs when the evaluator descends into the node, receives the
	// component context through which it may call Evaluate, and returns
	// the renderable value the component composes.
	Fn func(cc *ComponentContext) (any, error)
	// Entry marks the workflow's entry component: it runs as a component
	// (so it may call Evaluate) but does not count toward max_depth.
	Entry    bool
	Position Position
	// Args, when set, describes the arguments of the call that made the
	// node, one per argument ("value" or "name=value", values shortened),
	// for pictures and diagnostics; it must not run anything. Nil means
	// unknown.
	Args func() []string

	// active counts the evaluations of this node in progress (read and
	// written atomically); it lets cycle detection skip the common case.
	active int32
}

// Kind implements Node.
func (*Agent) Kind() string { return "agent" }

// Kind implements Node.
func (*System) Kind() string { return "system" }

// Kind implements Node.
func (*FollowUp) Kind() string { return "follow_up" }

// Kind implements Node.
func (*Block) Kind() string { return "block" }

// Kind implements Node.
func (*Fragment) Kind() string { return "fragment" }

// Kind implements Node.
func (*Parallel) Kind() string { return "parallel" }

// Kind implements Node.
func (*Component) Kind() string { return "component" }

// Pos implements Node.
func (n *Agent) Pos() Position { return n.Position }

// Pos implements Node.
func (n *System) Pos() Position { return n.Position }

// Pos implements Node.
func (n *FollowUp) Pos() Position { return n.Position }

// Pos implements Node.
func (n *Block) Pos() Position { return n.Position }

// Pos implements Node.
func (n *Fragment) Pos() Position { return n.Position }

// Pos implements Node.
func (n *Parallel) Pos() Position { return n.Position }

// Pos implements Node.
func (n *Component) Pos() Position { return n.Position }

// scalarText converts the scalar renderables to their text. ok is false
// for values that are not scalars.
func scalarText(v any) (text string, ok bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case nil, bool:
		return "", true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32), true
	}
	return "", false
}

// unrenderable builds the error for a value the evaluator cannot render.
func unrenderable(v any, pos Position) error {
	return newError(pos, fmt.Sprintf("value of type %s is not renderable: only strings, numbers, None, booleans, lists and AML nodes can be rendered; turn data into text first (in Starlark: json.encode(value))", goTypeName(v)))
}

func goTypeName(v any) string {
	if n, ok := v.(interface{ TypeName() string }); ok {
		return n.TypeName()
	}
	return fmt.Sprintf("%T", v)
}

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
