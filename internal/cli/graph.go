package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/graph"
	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/starlib"
)

const graphUsage = `usage: aml graph FILE [--entry NAME] [-o OUT]

Draws the tree the workflow builds, without running any provider: agents
(name, provider, model, schema, prompt, system and follow-up turns,
granted tools, MCP servers and skills), parallel() fan-outs, components
(a component's body runs only when the workflow runs: it is a dashed box
with what its code is known to call), scripts and files, and sandbox and
workspace scopes as frames. Each node links to its file:line.

The entry function's body runs to build the tree (with print() silenced);
if it needs a run to do so (it calls evaluate() or ask()), the entry is
drawn as a component box and a note says why.

OUT's extension picks the format: .mmd (Mermaid), .dot (Graphviz), .svg,
.png (both drawn by aml itself) or .html (one self-contained page with the
picture and each node's source). Without -o, Mermaid goes to stdout.

Flags:
`

// cmdGraph is "aml graph".
func cmdGraph(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("graph", graphUsage, stderr)
	entry := fs.String("entry", "", "global to draw (default main)")
	fs.StringVar(entry, "e", "", "shorthand for --entry")
	out := fs.String("o", "", "write the picture to this file; its extension (.mmd, .dot, .svg, .png, .html) picks the format")
	envFile := fs.String("runtime-env-file", "", "environment file applied after the .env files, as for aml run")
	rest, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 1 {
		fs.Usage()
		return exitUsage
	}
	file := rest[0]
	format := "mmd"
	if *out != "" {
		var err error
		if format, err = graph.FormatOf(*out); err != nil {
			fmt.Fprintf(stderr, "aml graph: %v\n", err)
			return exitUsage
		}
	}
	if err := loadEnvFiles(file, *envFile); err != nil {
		fmt.Fprintf(stderr, "aml graph: %v\n", err)
		return exitUsage
	}
	wf, err := starlib.LoadFile(file, starlib.LoadOptions{Print: func(string) {}, Extensions: extensions()})
	if err != nil {
		printError(stderr, err)
		return exitUsage
	}
	value, err := wf.Entry(*entry)
	if err != nil {
		printError(stderr, err)
		return exitUsage
	}
	var opts eval.Options
	wf.ApplyConfig(&opts)
	name := *entry
	if name == "" {
		name = "main"
	}
	g := graph.Build(value, graph.Options{
		Title: filepath.Base(file) + " · " + name,
		Expand: func(c *eval.Component) (any, error) {
			return eval.Expand(context.Background(), c)
		},
		Describe:          func(c *eval.Component) []string { return describeComponent(c, wf.Files()) },
		AgentProvider:     providerLabel(opts.AgentProvider),
		SandboxProvider:   providerLabel(opts.SandboxProvider),
		WorkspaceProvider: providerLabel(opts.WorkspaceProvider),
	})
	var buf bytes.Buffer
	if err := graph.Write(&buf, g, format, graph.HTMLOptions{Source: os.ReadFile}); err != nil {
		fmt.Fprintf(stderr, "aml graph: %v\n", err)
		return exitFailure
	}
	if *out == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return exitFailure
		}
		return exitOK
	}
	if err := durable.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "aml graph: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// providerLabel names a configured default provider, "" for none.
func providerLabel(p interface{ Name() string }) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// graphBuiltins are the builtins a component body's description names.
var graphBuiltins = map[string]bool{
	"agent": true, "parallel": true, "evaluate": true, "evaluate_all": true, "script": true,
	"sandbox": true, "workspace": true, "file": true, "include": true, "ask": true, "approve": true,
	"tool": true, "mcp_server": true, "skill": true, "follow_up": true, "system": true,
}

// describeComponent says what a lazy component's body is known to call:
// its parameters, and the AML builtins its code calls (with the names and
// models of the agents, where they are literals). The body is the def at
// the component's position, else the function named there
// (component(_review)), else a def of the component's name, looked up in
// the component's file and then in the workflow's files. A file that
// cannot be read or parsed describes nothing.
func describeComponent(c *eval.Component, files []string) []string {
	if c.Position.File == "" {
		return nil
	}
	parsed := map[string]*syntax.File{}
	parse := func(path string) *syntax.File {
		if f, ok := parsed[path]; ok {
			return f
		}
		var f *syntax.File
		if src, err := os.ReadFile(path); err == nil {
			f, _ = starlib.FileOptions.Parse(path, src, 0)
		}
		parsed[path] = f
		return f
	}
	home := parse(c.Position.File)
	names := []string{c.Name, "_" + c.Name}
	var def *syntax.DefStmt
	if home != nil {
		syntax.Walk(home, func(n syntax.Node) bool {
			if id, ok := n.(*syntax.Ident); ok && int32(id.NamePos.Line) == c.Position.Line && int32(id.NamePos.Col) == c.Position.Col {
				names = append([]string{id.Name}, names...)
			}
			return true
		})
		for _, st := range home.Stmts {
			if d, ok := st.(*syntax.DefStmt); ok {
				if start, _ := d.Span(); int32(start.Line) == c.Position.Line {
					def = d
					break
				}
			}
		}
	}
	for _, path := range append([]string{c.Position.File}, files...) {
		f := parse(path)
		for _, name := range names {
			if def != nil || f == nil {
				break
			}
			for _, st := range f.Stmts {
				if d, ok := st.(*syntax.DefStmt); ok && d.Name.Name == name {
					def = d
					break
				}
			}
		}
	}
	if def == nil {
		return nil
	}
	var lines []string
	var params []string
	for _, p := range def.Params {
		switch p := p.(type) {
		case *syntax.Ident:
			params = append(params, p.Name)
		case *syntax.BinaryExpr:
			if id, ok := p.X.(*syntax.Ident); ok {
				params = append(params, id.Name+"=…")
			}
		case *syntax.UnaryExpr:
			if id, ok := p.X.(*syntax.Ident); ok {
				params = append(params, p.Op.String()+id.Name)
			}
		}
	}
	if len(params) > 0 && c.Args == nil {
		lines = append(lines, "parameters: "+strings.Join(params, ", "))
	}
	counts := map[string]int{}
	var agents []string
	syntax.Walk(def, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		id, ok := call.Fn.(*syntax.Ident)
		if !ok || !graphBuiltins[id.Name] {
			return true
		}
		counts[id.Name]++
		if id.Name == "agent" {
			var name, model string
			for _, a := range call.Args {
				if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
					k, _ := b.X.(*syntax.Ident)
					lit, _ := b.Y.(*syntax.Literal)
					if k == nil || lit == nil || lit.Token != syntax.STRING {
						continue
					}
					switch k.Name {
					case "name":
						name = lit.Value.(string)
					case "model":
						model = lit.Value.(string)
					}
				}
			}
			switch {
			case name != "" && model != "":
				agents = append(agents, strconv.Quote(name)+" ("+model+")")
			case name != "":
				agents = append(agents, strconv.Quote(name))
			case model != "":
				agents = append(agents, "("+model+")")
			}
		}
		return true
	})
	if len(counts) > 0 {
		names := make([]string, 0, len(counts))
		for k := range counts {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = k + "()"
			if counts[k] > 1 {
				parts[i] += fmt.Sprintf(" ×%d", counts[k])
			}
		}
		lines = append(lines, "calls: "+strings.Join(parts, ", "))
	}
	if len(agents) > 0 {
		lines = append(lines, "agents: "+strings.Join(agents, ", "))
	}
	return lines
}
