package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/stdlib"
)

// cmdDoc prints the builtin reference from the shared catalog: an index
// without arguments, one builtin or standard module with a name.
func cmdDoc(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintln(stderr, "usage: aml doc [NAME]")
		return exitUsage
	}
	if len(args) == 0 {
		fmt.Fprintln(stdout, "AML builtins (aml doc NAME for details)")
		group := ""
		for _, b := range starlib.Catalog() {
			if b.Group != group {
				group = b.Group
				fmt.Fprintf(stdout, "\n%s:\n", group)
			}
			fmt.Fprintf(stdout, "  %-22s %s\n", b.Name, b.Summary())
		}
		fmt.Fprintln(stdout, "\nvalues:")
		fmt.Fprintf(stdout, "  %-22s %s\n", "schema", "JSON Schema builders (schema.object, schema.string, ...; listed above)")
		fmt.Fprintf(stdout, "  %-22s %s\n", "json", "encode, decode, indent, encode_indent (go.starlark.net/lib/json)")
		fmt.Fprintf(stdout, "  %-22s %s\n", "struct", "struct(**fields) builds an immutable record")
		fmt.Fprintln(stdout, "\nstandard modules (load(\"@std/text\", \"dedent\")):")
		for _, m := range stdlib.Names() {
			fmt.Fprintf(stdout, "  %-22s %s\n", m, firstSentence(stdlib.Doc(m)))
		}
		return exitOK
	}
	name := args[0]
	if b, ok := starlib.Lookup(name); ok {
		writeBuiltinDoc(stdout, b)
		return exitOK
	}
	if doc := stdlib.Doc(name); doc != "" {
		fmt.Fprintf(stdout, "%s\n\n%s\n", name, doc)
		for _, m := range stdlib.Members(name) {
			fmt.Fprintf(stdout, "\n  %s\n      %s\n", m.Signature, m.Doc)
		}
		return exitOK
	}
	fmt.Fprintf(stderr, "aml doc: no builtin or standard module named %q; run 'aml doc' for the index\n", name)
	return exitUsage
}

func writeBuiltinDoc(w io.Writer, b *starlib.Builtin) {
	fmt.Fprintf(w, "%s\n\n%s\n", b.Signature(), b.Doc)
	if len(b.Params) > 0 {
		fmt.Fprintln(w, "\nParameters:")
		for _, p := range b.Params {
			name := p.Name
			if p.Variadic {
				name = "*" + name
			}
			if p.Kwargs {
				name = "**" + name
			}
			def := ""
			if p.Default != "" {
				def = ", default " + p.Default
			}
			fmt.Fprintf(w, "  %s (%s%s)\n      %s\n", name, p.Type, def, p.Doc)
		}
	}
	if b.Returns != "" {
		fmt.Fprintf(w, "\nReturns: %s\n", b.Returns)
	}
	if b.Example != "" {
		fmt.Fprintf(w, "\nExample:\n  %s\n", b.Example)
	}
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

// amlVersion is the version string of this build.
func amlVersion() string {
	v := version
	if v == "" {
		v = "(devel)"
		if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
			v = info.Main.Version
		}
	}
	return v
}

func cmdVersion(stdout io.Writer) int {
	v := amlVersion()
	fmt.Fprintf(stdout, "aml %s %s/%s %s\n", v, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return exitOK
}
