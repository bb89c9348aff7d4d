package persiststar_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/persiststar"
)

// storeOptions is a builtin that declares the five parameters and
// returns what Options reads from them.
var storeOptions = &starlib.Extension{Name: "store", Builtins: []*starlib.Builtin{{
	Name:   "store_options",
	Group:  "providers",
	Doc:    "Returns the store options of its arguments.",
	Params: append([]starlib.Param{persiststar.FormatParam}, persiststar.ResourceParams...),
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		opts, err := persiststar.Options(c)
		if err != nil {
			return nil, err
		}
		return starlark.String(fmt.Sprintf("%+v", opts)), nil
	},
}}}

// TestOptions: the arguments reach their fields, omitted ones stay zero
// for persist's defaults, temporary_directory resolves from the load
// directory, and the catalog and Options refuse what New could not use.
func TestOptions(t *testing.T) {
	dir := t.TempDir()
	run := func(args string) (string, error) {
		src := "def main():\n    return store_options(" + args + ")\n"
		return starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Dir: dir, Extensions: []*starlib.Extension{storeOptions}}, eval.Options{})
	}
	for _, c := range []struct{ args, want string }{
		{"", "{Format: MaxArchiveBytes:0 MaxEntries:0 MaxExtractedBytes:0 TemporaryDirectory:}"},
		{`format = "folder", max_archive_bytes = 7, max_entries = 8, max_extracted_bytes = 9, temporary_directory = "tmp"`,
			"{Format:folder MaxArchiveBytes:7 MaxEntries:8 MaxExtractedBytes:9 TemporaryDirectory:" + filepath.Join(dir, "tmp") + "}"},
		{`format = "archive", max_entries = None, temporary_directory = None`, "{Format:archive MaxArchiveBytes:0 MaxEntries:0 MaxExtractedBytes:0 TemporaryDirectory:}"},
	} {
		got, err := run(c.args)
		if err != nil || got != c.want {
			t.Errorf("store_options(%s) = %q, %v; want %q", c.args, got, err, c.want)
		}
	}
	for _, c := range []struct{ args, want string }{
		{`format = "zip"`, `"zip"`},
		{"max_entries = 0", "max_entries must be a positive integer"},
		{"max_archive_bytes = -1", "max_archive_bytes must be a positive integer"},
		{"max_extracted_bytes = 1 << 70", "store_options: max_extracted_bytes is out of range"},
	} {
		if _, err := run(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("store_options(%s): %v, want an error with %q", c.args, err, c.want)
		}
	}
}
