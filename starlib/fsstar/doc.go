// Package fsstar binds the filesystem workspace provider to Starlark:
// filesystem_workspace(), persistent revisions in a directory.
//
// It lives outside package starlib because the persistent revision store
// brings its archive and .gitignore dependencies with it. Add Extension to
// starlib.LoadOptions.Extensions (the aml command does) to make the
// factory available.
package fsstar
