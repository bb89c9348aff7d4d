package starlib

import (
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/local"
	wslocal "github.com/aml-go/aml/providers/workspace/local"
)

var sandboxBuiltin = &Builtin{
	Name:   "sandbox",
	Static: true,
	Group:  "resources",
	Doc: `Scopes execution: script(), file(), include(path=) and agents inside it run in one sandbox lease.

The outermost sandbox() acquires a lease from its provider (provider=, else configure(sandbox_provider=)) before its children run and releases it after them, also on failure and cancellation. A nested sandbox() is a view of that lease: it may narrow access from read-write to read-only, narrow root and move cwd, but never widen access or choose another provider. Inside a workspace() the sandbox works on the workspace's files. Agents inside need a provider that supports sandboxes.`,
	Params: []Param{
		childrenParam,
		{Name: "provider", Type: "sandbox_provider | None", Default: "None", Doc: "Provider of the outermost sandbox."},
		{Name: "access", Type: "str | None", Default: "None", Enum: accessValues, Doc: `"read-only" (the default of an outer sandbox) or "read-write"; a nested sandbox defaults to its parent's access.`},
		{Name: "root", Type: "str | None", Default: "None", Doc: "Logical root, relative to the parent's root (default \".\")."},
		{Name: "cwd", Type: "str | None", Default: "None", Doc: "Logical working directory relative to root (default: the workspace's cwd, else \".\")."},
	},
	Returns: "a sandbox node",
	Example: `sandbox(script(command = "go", args = ["test", "./..."]), access = "read-write")`,
	Impl: func(c *Call) (starlark.Value, error) {
		kids, err := c.Children()
		if err != nil {
			return nil, err
		}
		n := &eval.Sandbox{Children: kids, Access: eval.Access(c.Str("access")), Root: c.Str("root"), Cwd: c.Str("cwd"), Position: c.pos}
		if n.Access != "" && !n.Access.Valid() {
			return nil, c.Errorf(`access must be "read-only" or "read-write", got %q`, n.Access)
		}
		for _, f := range []struct{ name, v string }{{"root", n.Root}, {"cwd", n.Cwd}} {
			if c.Has(f.name) {
				if _, err := eval.CheckLogicalPath(f.v, true); err != nil {
					return nil, c.Errorf("%s: %v", f.name, err)
				}
			}
		}
		if p, ok := c.Value("provider").(*SandboxProviderValue); ok {
			n.Provider = p.Provider
		}
		return nodeValue(n), nil
	},
}

var workspaceBuiltin = &Builtin{
	Name:   "workspace",
	Static: true,
	Group:  "resources",
	Doc: `Scopes durable files: the workspace is acquired and a revision materialized before its children run, saved by its policy and released after them.

At most one workspace() runs per evaluation, never inside a sandbox(). restore= selects what to materialize: True (the current revision), False (start empty), a revision id, or {"revision": ..., "include": [...], "exclude": [...]}. save= publishes: False (never), True (on success, honouring .gitignore, keeping one revision), "always" (also after a failure, never after cancellation), or {"on": "success"|"always", "include": [...], "exclude": [...], "gitignore": bool, "retention": n}. lock=False skips the writer lock (a stale publication still fails). write_concurrency="serial" lets writable sibling sandboxes take turns.`,
	Params: []Param{
		childrenParam,
		{Name: "id", Type: "str | None", Default: "None", Doc: "Durable identity; a random one when omitted."},
		{Name: "provider", Type: "workspace_provider | None", Default: "None", Doc: "Workspace provider; else configure(workspace_provider=)."},
		{Name: "cwd", Type: "str", Default: `"."`, Doc: "Logical working directory of descendants."},
		{Name: "restore", Type: "bool | str | dict", Default: "True", Keys: restoreKeys, Doc: "What to materialize (the original's load=)."},
		{Name: "save", Type: "bool | str | dict", Default: "False", Keys: saveKeys, Doc: "Publication policy."},
		{Name: "lock", Type: "bool", Default: "True", Doc: "Take the exclusive writer lock."},
		{Name: "write_concurrency", Type: "str", Default: `"serial"`, Enum: []string{"serial", "parallel"}, Doc: `"serial" or "parallel" writable sibling sandboxes.`},
	},
	Returns: "a workspace node",
	Example: `workspace(file("notes.md", path = "notes.md"), id = "review-42", provider = local_workspace(directory = "."), save = True)`,
	Impl:    workspaceImpl,
}

// restoreKeys and saveKeys are the keys of workspace(restore=) and
// (save=) dicts.
var (
	restoreKeys = []Key{
		{Name: "revision", Type: "str", Doc: `The revision to materialize: "current" (the default) or a revision id.`},
		{Name: "include", Type: "list", Doc: "Glob patterns of the paths to materialize; the others are left out."},
		{Name: "exclude", Type: "list", Doc: "Glob patterns of paths left out of what is materialized."},
	}
	saveKeys = []Key{
		{Name: "on", Type: "str", Enum: []string{"success", "always"}, Doc: `When to publish a revision: "success" (the default) only when what the workspace holds succeeded, "always" after a failure too.`},
		{Name: "include", Type: "list", Doc: "Glob patterns of the paths saved; the others are left out (and .gitignore is not read)."},
		{Name: "exclude", Type: "list", Doc: "Glob patterns of paths left out of the revision."},
		{Name: "gitignore", Type: "bool", Doc: "Whether the tree's .gitignore files leave paths out (default True; not with include)."},
		{Name: "retention", Type: "int", Doc: "How many revisions to keep, the new one included (default 1); older ones are pruned after publication."},
	}
)

func workspaceImpl(c *Call) (starlark.Value, error) {
	kids, err := c.Children()
	if err != nil {
		return nil, err
	}
	n := &eval.Workspace{Children: kids, ID: c.Str("id"), Cwd: c.Str("cwd"), NoLock: !c.Bool("lock", true), Position: c.pos}
	if p, ok := c.Value("provider").(*WorkspaceProviderValue); ok {
		n.Provider = p.Provider
	}
	if c.Has("id") && n.ID == "" {
		return nil, c.Errorf("id must be a non-empty string; omit id to generate one")
	}
	if c.Has("cwd") && n.Cwd == "" {
		return nil, c.Errorf(`cwd must be a non-empty logical path; omit it for "."`)
	}
	n.WriteConcurrency = c.Str("write_concurrency")
	// restore=
	n.Load = &eval.WorkspaceLoad{Revision: "current"}
	switch v := c.Value("restore").(type) {
	case nil:
	case starlark.Bool:
		if !v {
			n.Load = nil
		}
	case starlark.String:
		if v == "" {
			return nil, c.Errorf("restore must be True, False, a revision id or a dict")
		}
		n.Load.Revision = string(v)
	case *starlark.Dict:
		if err := fillLoad(c, v, n.Load); err != nil {
			return nil, err
		}
	}
	// save=
	switch v := c.Value("save").(type) {
	case nil:
	case starlark.Bool:
		if v {
			n.Save = eval.DefaultSavePolicy()
		}
	case starlark.String:
		switch v {
		case "success":
			n.Save = eval.DefaultSavePolicy()
		case "always":
			n.Save = eval.DefaultSavePolicy()
			n.Save.On = "always"
		default:
			return nil, c.Errorf(`save must be True, False, "always" or a dict, got %q`, string(v))
		}
	case *starlark.Dict:
		pol, err := savePolicy(c, v)
		if err != nil {
			return nil, err
		}
		n.Save = pol
	}
	// The rules of every value are the workspace contract's own, which the
	// evaluator and the providers apply too.
	if err := n.Validate(); err != nil {
		return nil, c.Errorf("%v", err)
	}
	return nodeValue(n), nil
}

// dictFields returns a dict's items keyed by string; the catalog has
// checked its keys against the parameter's Keys.
func dictFields(d *starlark.Dict) map[string]starlark.Value {
	out := map[string]starlark.Value{}
	for _, kv := range d.Items() {
		if k, ok := kv[0].(starlark.String); ok {
			out[string(k)] = kv[1]
		}
	}
	return out
}

func globList(c *Call, arg string, v starlark.Value) ([]string, error) {
	globs, err := stringList(v)
	if err != nil {
		return nil, c.Errorf("%s %v", arg, err)
	}
	return globs, nil
}

func fillLoad(c *Call, d *starlark.Dict, load *eval.WorkspaceLoad) error {
	f := dictFields(d)
	var err error
	if v, ok := f["revision"].(starlark.String); ok { // a string: the catalog checked it
		load.Revision = string(v)
	}
	if v, ok := f["include"]; ok {
		if load.Include, err = globList(c, `restore["include"]`, v); err != nil {
			return err
		}
	}
	if v, ok := f["exclude"]; ok {
		if load.Exclude, err = globList(c, `restore["exclude"]`, v); err != nil {
			return err
		}
	}
	return nil
}

func savePolicy(c *Call, d *starlark.Dict) (*eval.SavePolicy, error) {
	f := dictFields(d)
	var err error
	pol := eval.DefaultSavePolicy()
	// The catalog checked the keys and their types (saveKeys).
	if v, ok := f["on"].(starlark.String); ok {
		pol.On = string(v)
	}
	if v, ok := f["include"]; ok {
		if pol.Include, err = globList(c, `save["include"]`, v); err != nil {
			return nil, err
		}
	}
	if v, ok := f["exclude"]; ok {
		if pol.Exclude, err = globList(c, `save["exclude"]`, v); err != nil {
			return nil, err
		}
	}
	if v, ok := f["gitignore"].(starlark.Bool); ok {
		pol.Gitignore = bool(v)
	}
	if v, ok := f["retention"]; ok {
		n, ok := v.(starlark.Int)
		r, exact := n.Int64()
		if !ok || !exact || r < 1 || r > 1<<31 {
			return nil, c.Errorf(`save["retention"] must be a positive integer (it counts the new revision), got %s`, v.String())
		}
		pol.Retention = int(r)
	}
	return pol, nil
}

var fileBuiltin = &Builtin{
	Name:   "file",
	Static: true,
	Group:  "resources",
	Doc: `Replaces one complete UTF-8 file in the nearest active filesystem: the enclosing sandbox's, else the workspace materialization.

The content is the resolved children (child agents finish first, so later siblings see the complete file), or the application file src= read from the runtime's working directory. path is relative, slash-separated and may not leave its root (absolute paths, backslashes, .. and escaping symbolic links are errors). A read-only sandbox rejects the write. file() contributes no text.`,
	Params: []Param{
		childrenParam,
		{Name: "path", Type: "str", Doc: "Logical destination."},
		{Name: "src", Type: "str | None", Default: "None", Doc: "Application file to copy instead of children."},
	},
	Returns: "a file node",
	Example: `file(agent("Write the release notes."), path = "NOTES.md")`,
	Impl: func(c *Call) (starlark.Value, error) {
		kids, err := c.Children()
		if err != nil {
			return nil, err
		}
		n := &eval.File{Children: kids, Path: c.Str("path"), Src: c.Str("src"), Position: c.pos}
		if _, err := eval.CheckLogicalPath(n.Path, false); err != nil {
			return nil, c.Errorf("path: %v", err)
		}
		if c.Has("src") && (n.Src == "" || len(kids) > 0) {
			return nil, c.Errorf("pass either children or a non-empty src=, not both")
		}
		return nodeValue(n), nil
	},
}

var scriptBuiltin = &Builtin{
	Name:   "script",
	Static: true,
	Group:  "resources",
	Doc: `Runs one command and contributes its standard output.

Two forms: script(command = "go", args = ["test", "./..."]) runs one executable with literal arguments (no shell interpolation); script(source, shell = "sh"|"bash"|"node") runs the resolved children as source. Without a sandbox it runs on the host from the runtime's working directory (trusted execution; output is bounded, and cancellation or timeout_ms kills its whole process tree); inside a sandbox() it runs through the sandbox and never falls back to the host. cwd= is relative (to the working directory on the host, to the sandbox root inside one). A non-zero exit fails with the exit code and the trimmed standard error.`,
	Params: []Param{
		childrenParam,
		{Name: "command", Type: "str | None", Default: "None", Doc: "Executable of the literal form."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Literal arguments (command form only)."},
		{Name: "shell", Type: "str | None", Default: "None", Enum: []string{"sh", "bash", "node"}, Doc: `"sh", "bash" or "node" for the source form.`},
		{Name: "cwd", Type: "str | None", Default: "None", Doc: "Logical working directory."},
		{Name: "timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Positive bound in milliseconds."},
	},
	Returns: "a script node",
	Example: `script("git log --oneline -5", shell = "sh")`,
	Impl:    scriptImpl,
}

func scriptImpl(c *Call) (starlark.Value, error) {
	kids, err := c.Children()
	if err != nil {
		return nil, err
	}
	n := &eval.Script{Children: kids, Command: c.Str("command"), Shell: c.Str("shell"), Cwd: c.Str("cwd"), Position: c.pos}
	if v := c.Value("args"); v != nil {
		if n.Args, err = stringList(v); err != nil {
			return nil, c.Errorf("args %v", err)
		}
	}
	switch {
	case c.Has("command") == c.Has("shell"):
		return nil, c.Errorf(`pass exactly one of command= (literal argv) and shell= ("sh", "bash" or "node" with source children)`)
	case c.Has("command") && n.Command == "":
		return nil, c.Errorf("command must be a non-empty executable name")
	case c.Has("command") && len(kids) > 0:
		return nil, c.Errorf("the command= form takes no children; use shell= to run source")
	case c.Has("shell") && n.Args != nil && len(n.Args) > 0:
		return nil, c.Errorf("args= is only valid with command=")
	case c.Has("shell") && n.Shell != "sh" && n.Shell != "bash" && n.Shell != "node":
		return nil, c.Errorf(`shell must be "sh", "bash" or "node", got %q`, n.Shell)
	case c.Has("shell") && len(kids) == 0:
		return nil, c.Errorf("the shell= form needs the source as children")
	}
	if c.Has("cwd") {
		if _, err := eval.CheckLogicalPath(n.Cwd, true); err != nil {
			return nil, c.Errorf("cwd: %v", err)
		}
	}
	if ms, set, err := c.Int("timeout_ms"); err != nil {
		return nil, err
	} else if set {
		n.TimeoutMS = ms // positive: the catalog checked it
	}
	return nodeValue(n), nil
}

// SandboxProviderValue is the Starlark value of a sandbox provider.
type SandboxProviderValue struct{ Provider eval.SandboxProvider }

// String implements starlark.Value.
func (v *SandboxProviderValue) String() string {
	return fmt.Sprintf("<sandbox_provider %q>", v.Provider.Name())
}

// Type implements starlark.Value.
func (v *SandboxProviderValue) Type() string { return "sandbox_provider" }

// Freeze implements starlark.Value; providers are immutable values.
func (v *SandboxProviderValue) Freeze() {}

// Truth implements starlark.Value.
func (v *SandboxProviderValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *SandboxProviderValue) Hash() (uint32, error) { return identityHash(v.Provider), nil }

// WorkspaceProviderValue is the Starlark value of a workspace provider.
type WorkspaceProviderValue struct{ Provider eval.WorkspaceProvider }

// String implements starlark.Value.
func (v *WorkspaceProviderValue) String() string {
	return fmt.Sprintf("<workspace_provider %q>", v.Provider.Name())
}

// Type implements starlark.Value.
func (v *WorkspaceProviderValue) Type() string { return "workspace_provider" }

// Freeze implements starlark.Value; providers are immutable values.
func (v *WorkspaceProviderValue) Freeze() {}

// Truth implements starlark.Value.
func (v *WorkspaceProviderValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *WorkspaceProviderValue) Hash() (uint32, error) { return identityHash(v.Provider), nil }

var localSandboxBuiltin = &Builtin{
	Name:  "local_sandbox",
	Group: "providers",
	Doc: `Returns the local sandbox provider: trusted host execution, not isolation.

Commands run as host processes in their own process groups with literal arguments; cancellation, timeouts, output overflow and release kill the whole tree. The sandbox works on the active workspace's directory (or workspace=, a fallback directory); paths are confined to it with real-path checks. Read-only access rejects commands (host processes cannot enforce it) but allows reads. setup= runs "sh -lc <setup>" in the sandbox on every acquisition; a non-zero exit, or running past setup_timeout_ms, fails the acquisition.`,
	Params: []Param{
		{Name: "setup", Type: "str | None", Default: "None", Doc: "Trusted shell command run on every acquisition."},
		{Name: "setup_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Bound on setup= (default 600000, ten minutes); past it the setup's process group is killed and the acquisition fails."},
		{Name: "workspace", Type: "str | None", Default: "None", Doc: "Fallback directory when no workspace() is active."},
		{Name: "max_output_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on a command's combined output (default 4 MiB)."},
	},
	Returns: "a sandbox provider",
	Example: `configure(sandbox_provider = local_sandbox(workspace = "."))`,
	// It validates and builds; it starts nothing: aml check runs it on
	// literal arguments.
	Static: true,
	Impl: func(c *Call) (starlark.Value, error) {
		opts := local.Options{Setup: c.Str("setup"), Workspace: c.Str("workspace")}
		if ms, set, err := c.Int("setup_timeout_ms"); err != nil {
			return nil, err
		} else if set {
			opts.SetupTimeout = time.Duration(ms) * time.Millisecond
		}
		if n, set, err := c.Int("max_output_bytes"); err != nil {
			return nil, err
		} else if set {
			opts.MaxOutputBytes = n // positive: the catalog checked it
		}
		// Relative directories resolve from the working directory, like
		// other application paths.
		if abs, err := c.Abs(opts.Workspace); err == nil {
			opts.Workspace = abs
		}
		p, err := local.New(opts)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &SandboxProviderValue{Provider: p}, nil
	},
}

var localWorkspaceBuiltin = &Builtin{
	Name:  "local_workspace",
	Group: "providers",
	Doc: `Returns a workspace provider that works directly in an existing directory.

The directory itself is the materialization (no revisions; saving only checks that the lock is still held). Its identity is the physical directory: a cross-process lock beside it (<directory>.lock, refreshed every 5 minutes, stale after 20) makes a second writer fail with a WorkspaceConflictError. Relative directories resolve from the working directory.`,
	Params:  []Param{{Name: "directory", Type: "str", Doc: "An existing directory."}},
	Returns: "a workspace provider",
	Example: `configure(workspace_provider = local_workspace(directory = "."))`,
	// It validates and builds; it starts nothing: aml check runs it on
	// literal arguments.
	Static: true,
	Impl: func(c *Call) (starlark.Value, error) {
		dir, err := c.Abs(c.Str("directory"))
		if err != nil {
			return nil, c.Errorf("directory %q: %v", c.Str("directory"), err)
		}
		p, err := wslocal.New(wslocal.Options{Directory: dir})
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &WorkspaceProviderValue{Provider: p}, nil
	},
}
