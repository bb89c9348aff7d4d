// Package persiststar declares the Starlark parameters of the options
// that every workspace provider built on the revision store shares
// (persist.StoreOptions) and reads them from a call: the factories of
// starlib/fsstar and starlib/s3star declare and parse them here, once.
//
// It lives outside package starlib for the reason those factories do: the
// persistent revision store brings its archive and .gitignore
// dependencies with it.
package persiststar

import (
	"strconv"

	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
)

// The parameters of persist.StoreOptions. A factory lists FormatParam
// beside the parameters that say where the store is, and ResourceParams
// together, and reads all five with Options. They are shared values:
// do not modify them.
var (
	// FormatParam is format=, the format of new revisions
	// (StoreOptions.Format).
	FormatParam = starlib.Param{Name: "format", Type: "str", Default: strconv.Quote(persist.FormatArchive), Enum: []string{persist.FormatArchive, persist.FormatFolder},
		Doc: `"archive" or "folder" for new revisions.`}
	// ResourceParams are max_archive_bytes=, max_entries=,
	// max_extracted_bytes= and temporary_directory=: the bounds of a
	// revision and the directory it is materialized in
	// (StoreOptions.MaxArchiveBytes, MaxEntries, MaxExtractedBytes and
	// TemporaryDirectory).
	ResourceParams = []starlib.Param{
		{Name: "max_archive_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on a compressed archive (default 256 MiB)."},
		{Name: "max_entries", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on the entries of a revision (default 1000000)."},
		{Name: "max_extracted_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on uncompressed bytes (default 1 GiB)."},
		{Name: "temporary_directory", Type: "str | None", Default: "None", Doc: "Parent of materializations (default the system temporary directory)."},
	}
)

// Options reads the arguments of FormatParam and ResourceParams from c,
// a call of a builtin that declares them: the format, the bounds that
// were passed (the catalog has checked that they are positive) and the
// temporary directory, resolved as c.Abs resolves paths. Omitted
// arguments leave their fields zero, for persist's defaults. It fails
// when the temporary directory cannot be resolved or a bound does not
// fit an int64, with an error that names the builtin. Like c, it is used
// only by the goroutine running the builtin.
func Options(c *starlib.Call) (persist.StoreOptions, error) {
	opts := persist.StoreOptions{Format: c.Str("format")}
	tmp, err := c.Abs(c.Str("temporary_directory"))
	if err != nil {
		return opts, c.Errorf("temporary_directory %q: %w", c.Str("temporary_directory"), err)
	}
	opts.TemporaryDirectory = tmp
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
