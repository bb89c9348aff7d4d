package cli

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
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, docUsage)
		return exitOK
	}
	if len(args) > 1 || len(args) == 1 && strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, docUsage)
		return exitUsage
	}
	if len(args) == 0 {
		fmt.Fprintln(stdout, "AML builtins (aml doc NAME for details)")
		group := ""
		for _, b := range starlib.Catalog(extensions()...) {
			if b.Group != group {
				group = b.Group
				fmt.Fprintf(stdout, "\n%s:\n", group)
			}
			fmt.Fprintf(stdout, "  %-22s %s\n", b.Name, b.Summary())
		}
		fmt.Fprintln(stdout, "\nvalues:")
		for _, v := range values {
			fmt.Fprintf(stdout, "  %-22s %s\n", v.name, v.summary)
		}
		fmt.Fprintln(stdout, "\nstandard modules (load(\"@std/text\", \"dedent\")):")
		for _, m := range stdlib.Names() {
			fmt.Fprintf(stdout, "  %-22s %s\n", m, firstSentence(stdlib.Doc(m)))
		}
		return exitOK
	}
	name := args[0]
	if b, ok := starlib.Lookup(name, extensions()...); ok {
		writeBuiltinDoc(stdout, b)
		return exitOK
	}
	for _, v := range values {
		if v.name == name {
			fmt.Fprintf(stdout, "%s\n\n%s\n", v.name, v.doc)
			for _, m := range v.members {
				fmt.Fprintf(stdout, "\n  %s\n      %s\n", m[0], m[1])
			}
			return exitOK
		}
		for _, m := range v.members {
			if sig := m[0]; strings.HasPrefix(sig, name+"(") {
				fmt.Fprintf(stdout, "%s\n\n%s\n", sig, m[1])
				return exitOK
			}
		}
	}
	if doc := stdlib.Doc(name); doc != "" {
		fmt.Fprintf(stdout, "%s\n\n%s\n", name, doc)
		for _, m := range stdlib.Members(name) {
			fmt.Fprintf(stdout, "\n  %s\n      %s\n", m.Signature, m.Doc)
		}
		return exitOK
	}
	if s := starlib.NearestName(name, docNames()); s != "" {
		fmt.Fprintf(stderr, "aml doc: no builtin or standard module named %q (did you mean %s?); run 'aml doc' for the index\n", name, s)
		return exitUsage
	}
	fmt.Fprintf(stderr, "aml doc: no builtin or standard module named %q; run 'aml doc' for the index\n", name)
	return exitUsage
}

// docNames are the names aml doc knows: builtins, predeclared values
// and their functions, standard modules.
func docNames() []string {
	var names []string
	for _, b := range starlib.Catalog(extensions()...) {
		names = append(names, b.Name)
	}
	for _, v := range values {
		names = append(names, v.name)
		for _, m := range v.members {
			if name, _, ok := strings.Cut(m[0], "("); ok && !strings.Contains(name, " ") {
				names = append(names, name)
			}
		}
	}
	return append(names, stdlib.Names()...)
}

const docUsage = `usage: aml doc [NAME]

Without NAME, prints the index of every builtin, predeclared value and
@std module. With NAME, prints the reference of one: a builtin (agent,
schema.object, local_sandbox, ...), a predeclared value or one of its
functions (json, json.encode, struct, schema) or a standard module
(@std/text). The reference comes from the catalog the runtime itself uses.
`

// values are the predeclared values that are not catalog builtins; each
// member is a signature and its documentation.
var values = []struct {
	name, summary, doc string
	members            [][2]string
}{
	{"schema", "JSON Schema builders (schema.object, schema.string, ...; listed above)",
		"The JSON Schema builders: each returns a JSON Schema (draft 2020-12) as a dict, for agent(schema=), evaluate(schema=), evaluate_all(schema=) and define_tool(input=, output=). Any hand-written JSON Schema dict works as well. aml doc schema.object (and so on) documents each builder.",
		[][2]string{
			{"schema.object(**properties)", "A dict with the given properties (all required unless wrapped in schema.optional)."},
			{"schema.string(), schema.integer(), schema.number(), schema.boolean()", "Scalars."},
			{"schema.array(items), schema.enum(*values), schema.literal(value)", "Lists, one of several values, one exact value."},
			{"schema.nullable(s), schema.optional(s), schema.describe(s, description)", "None or s; an optional property; a description for the model."},
		}},
	{"json", "encode, decode, indent, encode_indent (go.starlark.net/lib/json)",
		"JSON encoding and decoding (the go.starlark.net json module). Use json.encode to turn data into prompt text: dicts and structs are not renderable on their own.",
		[][2]string{
			{"json.encode(x)", "Returns the JSON text of x: None, bools, ints, floats (finite), strings, dicts with string keys (as objects), lists and tuples (as arrays) and structs (as objects); any other value is an error."},
			{"json.decode(x[, default])", "Returns the Starlark value of the JSON text x: objects become dicts, arrays lists, numbers int or float. Invalid JSON fails, or returns default when it is given."},
			{"json.indent(str, *, prefix=\"\", indent=\"\\t\")", "Returns the JSON text str reformatted with one element per line, each line starting with prefix and nested levels indented by indent."},
			{"json.encode_indent(x, *, prefix=\"\", indent=\"\\t\")", "The same as json.indent(json.encode(x), prefix=prefix, indent=indent)."},
		}},
	{"struct", "struct(**fields) builds an immutable record",
		"struct(**fields) returns an immutable record whose fields are the keyword arguments: s = struct(id = 42, title = \"Fix\"); s.id is 42. Structs compare by value; json.encode encodes them as objects. A struct is data, not text: render it with json.encode().",
		nil},
}

// paramName is a parameter as a signature writes it: *args, **kwargs.
func paramName(p starlib.Param) string {
	switch {
	case p.Kwargs:
		return "**" + p.Name
	case p.Variadic:
		return "*" + p.Name
	}
	return p.Name
}

func writeBuiltinDoc(w io.Writer, b *starlib.Builtin) {
	fmt.Fprintf(w, "%s\n\n%s\n", b.Signature(), b.Doc)
	if len(b.Params) > 0 {
		fmt.Fprintln(w, "\nParameters:")
		for _, p := range b.Params {
			name := paramName(p)
			def := ""
			if p.Default != "" {
				def = ", default " + p.Default
			}
			fmt.Fprintf(w, "  %s (%s%s)\n      %s\n", name, p.Type, def, p.Doc)
			if !p.OpenKeys {
				for _, k := range p.Keys {
					fmt.Fprintf(w, "        %q (%s): %s\n", k.Name, k.Type, k.Doc)
				}
			}
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

// version is the version linked into the aml executable (Run sets it
// from package main's version, which the release build sets to the tag
// with -ldflags "-X main.version=...").
var version = ""

// amlVersion is the version string of this build: the version set at
// link time, else the module version of a go install of a tagged
// version, else "(devel)"; the VCS revision the binary was built from
// follows when the build recorded one, marked "+dirty" when the tree had
// uncommitted changes.
func amlVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionString(version, info)
}

// versionString composes amlVersion's string from the link-time version
// and the build info (nil when the binary carries none).
func versionString(linked string, info *debug.BuildInfo) string {
	v := linked
	if v == "" && info != nil && info.Main.Version != "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if info == nil {
		return v
	}
	var rev, at string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if strings.Contains(v, rev) {
		return v // a pseudo-version names the revision already
	}
	if dirty {
		rev += "+dirty"
	}
	if at != "" {
		return fmt.Sprintf("%s (%s, %s)", v, rev, at)
	}
	return fmt.Sprintf("%s (%s)", v, rev)
}

func cmdVersion(stdout io.Writer) int {
	v := amlVersion()
	fmt.Fprintf(stdout, "aml %s %s/%s %s\n", v, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return exitOK
}
