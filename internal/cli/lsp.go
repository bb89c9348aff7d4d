package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/aml-go/aml/lsp"
)

const lspUsage = `usage: aml lsp

Runs the language server for .star workflow files on stdin and stdout
(the Language Server Protocol): diagnostics as you type (the checks of
aml check), hover with the builtin reference, completion, signature help,
go to definition and find references across load(), document and
workspace symbols, rename, formatting and quick fixes. Point an editor's
LSP client at "aml lsp"; docs/editors.md shows VS Code, Neovim, Helix and Zed set-ups.
Nothing is evaluated and no provider is constructed.

A message body that is not JSON gets a JSON-RPC parse error and the
session goes on. A header that cannot be used, a Content-Length over
64 MiB, or input that ends inside a message is reported on stderr and
ends the server.

Exit status: 0 after the client's shutdown and exit, 1 when the client
goes away without them or sends input that cannot be framed.
`

func cmdLSP(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lsp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, lspUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aml lsp: unexpected argument %q\n", fs.Arg(0))
		fmt.Fprint(stderr, lspUsage)
		return exitUsage
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A long-lived process whose live data is small and whose checks
		// make short-lived garbage: collect before the heap doubles.
		debug.SetMemoryLimit(lspMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := lsp.Serve(ctx, stdio{stdin, stdout}, lsp.Options{Extensions: extensions(), Version: amlVersion(), Lint: linked.Lint, Log: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "aml lsp: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// lspMemoryLimit is the soft memory limit of aml lsp (GOMEMLIMIT
// overrides it).
const lspMemoryLimit = 40 << 20

// stdio joins the process's stdin and stdout into one stream.
type stdio struct {
	io.Reader
	io.Writer
}

func (stdio) Close() error { return nil }
