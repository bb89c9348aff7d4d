package fsstar

import (
	"go.starlark.net/starlark"

	wsfs "github.com/aml-go/aml/providers/workspace/filesystem"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
)

// Extension adds filesystem_workspace() to workflows loaded with it
// (starlib.LoadOptions.Extensions).
var Extension = &starlib.Extension{
	Name:     "filesystem",
	Builtins: []*starlib.Builtin{filesystemWorkspaceBuiltin},
}

var filesystemWorkspaceBuiltin = &starlib.Builtin{
	Name:  "filesystem_workspace",
	Group: "providers",
	Doc: `Returns a workspace provider backed by a revision store in a directory.

Each save publishes a new revision (a tar.gz archive, or a folder that reuses unchanged files) and atomically switches the workspace.json index by compare-and-swap; older revisions are pruned by retention. Materializations are temporary copies. A cross-process lock with heartbeat rejects a second writer with a WorkspaceConflictError; a corrupted index or archive is reported as corruption, never as a conflict.`,
	Params: []starlib.Param{
		{Name: "directory", Type: "str", Doc: "Durable root of the store (created when needed)."},
		{Name: "format", Type: "str", Default: `"archive"`, Enum: []string{"archive", "folder"}, Doc: `"archive" or "folder" for new revisions.`},
		{Name: "max_archive_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on a compressed archive (default 256 MiB)."},
		{Name: "max_entries", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on the entries of a revision (default 1000000)."},
		{Name: "max_extracted_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on uncompressed bytes (default 1 GiB)."},
		{Name: "temporary_directory", Type: "str | None", Default: "None", Doc: "Parent of materializations (default the system temp directory)."},
	},
	Returns: "a workspace provider",
	Example: `configure(workspace_provider = filesystem_workspace(directory = ".aml/workspaces", format = "folder"))`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		opts, err := optionsOf(c)
		if err != nil {
			return nil, err
		}
		p, err := wsfs.New(opts)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &starlib.WorkspaceProviderValue{Provider: p}, nil
	},
	// aml check decides what wsfs.New refuses before it touches the
	// file system.
	Rules: func(c *starlib.Call) error {
		opts, err := optionsOf(c)
		if err != nil {
			return err
		}
		if err := wsfs.CheckOptions(opts); err != nil {
			return c.Errorf("%v", err)
		}
		return nil
	},
}

// optionsOf reads the options of a call of filesystem_workspace().
func optionsOf(c *starlib.Call) (wsfs.Options, error) {
	opts := wsfs.Options{StoreOptions: persist.StoreOptions{Format: c.Str("format")}}
	var err error
	if opts.Directory, err = c.Abs(c.Str("directory")); err != nil {
		return opts, c.Errorf("directory %q: %v", c.Str("directory"), err)
	}
	if opts.TemporaryDirectory, err = c.Abs(c.Str("temporary_directory")); err != nil {
		return opts, c.Errorf("temporary_directory %q: %v", c.Str("temporary_directory"), err)
	}
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{"max_archive_bytes", func(n int64) { opts.MaxArchiveBytes = n }},
		{"max_entries", func(n int64) { opts.MaxEntries = int(n) }},
		{"max_extracted_bytes", func(n int64) { opts.MaxExtractedBytes = n }},
	} {
		n, set, err := c.Int(f.name)
		if err != nil {
			return opts, err
		}
		if set {
			f.set(n) // positive: the catalog checked it
		}
	}
	return opts, nil
}
