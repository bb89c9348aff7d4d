package fsstar

import (
	"go.starlark.net/starlark"

	wsfs "github.com/aml-go/aml/providers/workspace/filesystem"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/persiststar"
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
	Params: append([]starlib.Param{
		{Name: "directory", Type: "str", Doc: "Durable root of the store (created when needed)."},
		persiststar.FormatParam,
	}, persiststar.ResourceParams...),
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
	dir, err := c.Abs(c.Str("directory"))
	if err != nil {
		return wsfs.Options{}, c.Errorf("directory %q: %w", c.Str("directory"), err)
	}
	store, err := persiststar.Options(c)
	if err != nil {
		return wsfs.Options{}, err
	}
	return wsfs.Options{Directory: dir, StoreOptions: store}, nil
}
