package graph

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aml-go/aml/eval"
)

// Kinds of nodes, as Node.Kind gives them.
const (
	KindSequence  = "sequence"  // children run one after the other
	KindParallel  = "parallel"  // parallel(): branches run at once
	KindAgent     = "agent"     // agent(): one provider session
	KindComponent = "component" // a component; Lazy unless expanded
	KindSandbox   = "sandbox"   // sandbox(): a frame around its children
	KindWorkspace = "workspace" // workspace(): a frame around its children
	KindScript    = "script"    // script()
	KindFile      = "file"      // file()
	KindInclude   = "include"   // include() outside an agent
	KindText      = "text"      // literal text the output contains
	KindProvide   = "provide"   // provide(): a frame around its children
	KindBudget    = "budget"    // budget(): a frame around its children
	KindMore      = "more"      // branches left out of a wide parallel()
)

// Wide fan-outs are cut: a parallel() with more than maxBranches
// branches shows its first shownBranches, a box counting the ones left
// out, and its last one.
const (
	maxBranches   = 8
	shownBranches = 3
)

// Node is one box of the picture. Frames (sandbox, workspace, provide,
// an expanded component) and sequences and fan-outs hold Children.
type Node struct {
	// ID is unique within the graph: "n1", "n2", … in tree order.
	ID string
	// Kind is one of the Kind constants.
	Kind string
	// Label is the node's title: agent "reviewer", parallel (3 branches).
	Label string
	// Details are the lines under the title: provider, model, schema,
	// turns, grants, what a lazy component's body is known to call.
	Details []string
	// Pos is where the node was authored.
	Pos eval.Position
	// Lazy marks a component whose body runs only when the workflow
	// runs: the picture cannot show its tree.
	Lazy bool
	// Children are the nodes inside: in order for a sequence or a frame,
	// the branches for a parallel.
	Children []*Node
}

// Frame reports whether n is drawn as a frame enclosing its children.
func (n *Node) Frame() bool {
	switch n.Kind {
	case KindSandbox, KindWorkspace, KindProvide, KindBudget:
		return true
	case KindComponent:
		return !n.Lazy
	}
	return false
}

// Graph is the picture of a workflow's tree.
type Graph struct {
	// Title names the workflow (its file, and the entry).
	Title string
	// Root is the tree.
	Root *Node
	// Note says why part of the tree is not shown ("" for none): the
	// entry's body needs a run to build its tree, say.
	Note string
}

// Options configure Build.
type Options struct {
	// Title is Graph.Title.
	Title string
	// Expand, when set, is called for the entry component (a component
	// at the root): it returns the tree the body builds, or an error
	// when building it needs a run (eval.Expand does this). Without it,
	// or when it fails, the component is drawn lazy.
	Expand func(*eval.Component) (any, error)
	// Describe returns what is statically known of a lazy component's
	// body, one line each (the builtins it calls, say); nil for none.
	Describe func(*eval.Component) []string
	// AgentProvider, SandboxProvider and WorkspaceProvider name the
	// default providers, shown where a node names none.
	AgentProvider, SandboxProvider, WorkspaceProvider string
}

// Build draws value, the tree a workflow's entry evaluates, without
// running anything but the entry's body (through opts.Expand).
func Build(value any, opts Options) *Graph {
	b := &builder{opts: opts}
	g := &Graph{Title: opts.Title}
	if c, ok := value.(*eval.Component); ok && opts.Expand != nil {
		tree, err := opts.Expand(c)
		if err == nil {
			root := b.newNode(KindComponent, "component "+c.Name, c.Position)
			root.Children = b.items(tree)
			g.Root = root
			return g
		}
		var se *eval.StaticError
		if errors.As(err, &se) {
			g.Note = se.Error()
		} else {
			g.Note = fmt.Sprintf("component %s could not be expanded: %v", c.Name, err)
		}
	}
	g.Root = b.single(value)
	if g.Root == nil {
		g.Root = b.newNode(KindSequence, "", eval.Position{})
	}
	return g
}

type builder struct {
	opts Options
	n    int
}

func (b *builder) newNode(kind, label string, pos eval.Position) *Node {
	b.n++
	return &Node{ID: "n" + strconv.Itoa(b.n), Kind: kind, Label: label, Pos: pos}
}

// single is the node of value: the one node, or a sequence of several.
func (b *builder) single(value any) *Node {
	items := b.items(value)
	switch len(items) {
	case 0:
		return nil
	case 1:
		return items[0]
	}
	seq := b.newNode(KindSequence, "", eval.Position{})
	seq.Children = items
	return seq
}

// items are the nodes of value in order, lists and fragments flattened.
func (b *builder) items(value any) []*Node {
	var out []*Node
	var textRun []string
	flush := func() {
		if len(textRun) > 0 {
			t := b.newNode(KindText, "text", eval.Position{})
			t.Details = []string{preview(strings.Join(textRun, ""))}
			out = append(out, t)
			textRun = nil
		}
	}
	flatten(value, func(v any) {
		if s, ok := scalar(v); ok {
			if strings.TrimSpace(s) != "" {
				textRun = append(textRun, s)
			}
			return
		}
		flush()
		if n := b.node(v); n != nil {
			out = append(out, n)
		}
	})
	flush()
	return out
}

// node draws one AML node; nil for what draws nothing.
func (b *builder) node(v any) *Node {
	switch v := v.(type) {
	case *eval.Agent:
		return b.agent(v)
	case *eval.Parallel:
		n := b.newNode(KindParallel, "", v.Position)
		var branch func(br any)
		branch = func(br any) {
			if l, ok := br.([]any); ok { // lists are flattened into branches
				for _, x := range l {
					branch(x)
				}
				return
			}
			if c := b.single(br); c != nil {
				n.Children = append(n.Children, c)
			}
		}
		for _, br := range v.Branches {
			branch(br)
		}
		n.Label = fmt.Sprintf("parallel (%d branches)", len(n.Children))
		if len(n.Children) == 1 {
			n.Label = "parallel (1 branch)"
		}
		if k := len(n.Children); k > maxBranches {
			more := b.newNode(KindMore, fmt.Sprintf("… %d more branches", k-shownBranches-1), v.Position)
			more.Details = []string{fmt.Sprintf("branches %d to %d", shownBranches+1, k-1)}
			last := n.Children[k-1]
			n.Children = append(n.Children[:shownBranches:shownBranches], more, last)
		}
		return n
	case *eval.Component:
		n := b.newNode(KindComponent, "component "+v.Name, v.Position)
		n.Lazy = true
		n.Details = []string{"runs when reached: its tree is built then"}
		if v.Args != nil {
			if args := v.Args(); len(args) > 0 {
				n.Details = append(n.Details, "called with: "+preview(strings.Join(args, ", ")))
			}
		}
		if b.opts.Describe != nil {
			n.Details = append(n.Details, b.opts.Describe(v)...)
		}
		return n
	case *eval.Sandbox:
		n := b.newNode(KindSandbox, "sandbox", v.Position)
		n.Details = append(n.Details, "provider: "+providerName(v.Provider, b.opts.SandboxProvider))
		access := string(v.Access)
		if access == "" {
			access = "read-only (default)"
		}
		n.Details = append(n.Details, "access: "+access)
		if v.Root != "" {
			n.Details = append(n.Details, "root: "+v.Root)
		}
		if v.Cwd != "" {
			n.Details = append(n.Details, "cwd: "+v.Cwd)
		}
		n.Children = b.items(v.Children)
		return n
	case *eval.Workspace:
		n := b.newNode(KindWorkspace, "workspace", v.Position)
		if v.ID != "" {
			n.Label = "workspace " + strconv.Quote(v.ID)
		}
		n.Details = append(n.Details, "provider: "+providerName(v.Provider, b.opts.WorkspaceProvider))
		if v.Load == nil {
			n.Details = append(n.Details, "starts empty")
		} else {
			n.Details = append(n.Details, "loads a saved revision")
		}
		if v.Save == nil {
			n.Details = append(n.Details, "never saves")
		} else {
			n.Details = append(n.Details, "saves on "+v.Save.On)
		}
		if v.Cwd != "" {
			n.Details = append(n.Details, "cwd: "+v.Cwd)
		}
		n.Children = b.items(v.Children)
		return n
	case *eval.BudgetScope:
		n := b.newNode(KindBudget, "budget", v.Position)
		n.Details = append(n.Details, budgetDetails(v.Budget)...)
		n.Children = b.items(v.Children)
		return n
	case *eval.Provide:
		n := b.newNode(KindProvide, "provide", v.Position)
		if v.Key != nil && v.Key.Name() != "" {
			n.Label = "provide " + v.Key.Name()
		}
		if s, ok := scalar(v.Value); ok {
			n.Details = append(n.Details, "value: "+preview(s))
		}
		n.Children = b.items(v.Children)
		return n
	case *eval.Script:
		n := b.newNode(KindScript, "script", v.Position)
		switch {
		case v.Shell != "":
			n.Details = append(n.Details, v.Shell+": "+preview(textOf(v.Children)))
		default:
			n.Details = append(n.Details, preview(strings.Join(append([]string{v.Command}, v.Args...), " ")))
		}
		if v.Cwd != "" {
			n.Details = append(n.Details, "cwd: "+v.Cwd)
		}
		return n
	case *eval.File:
		n := b.newNode(KindFile, "file "+v.Path, v.Position)
		if v.Src != "" {
			n.Details = append(n.Details, "from "+v.Src)
		}
		return n
	case *eval.Include:
		n := b.newNode(KindInclude, "include "+includeName(v), v.Position)
		return n
	}
	return nil
}

// agent draws an agent: its title and details, and the nodes its prompt
// runs first (a nested agent, a script) as a sequence before it.
func (b *builder) agent(a *eval.Agent) *Node {
	n := b.newNode(KindAgent, "agent", a.Position)
	if a.Name != "" {
		n.Label = "agent " + strconv.Quote(a.Name)
	}
	n.Details = append(n.Details, "provider: "+providerName(a.Provider, b.opts.AgentProvider))
	if a.Model != "" {
		n.Details = append(n.Details, "model: "+a.Model)
	}
	if a.Schema != nil {
		n.Details = append(n.Details, "schema: "+schemaSummary(a.Schema))
	}
	var (
		prompt    strings.Builder
		system    []string
		followUps []string
		grants    []string
		before    []*Node
	)
	if a.System != "" {
		system = append(system, a.System)
	}
	var walk func(v any, into *strings.Builder)
	walk = func(v any, into *strings.Builder) {
		switch v := v.(type) {
		case *eval.System:
			var s strings.Builder
			flatten(v.Children, func(c any) { walk(c, &s) })
			system = append(system, s.String())
		case *eval.FollowUp:
			var s strings.Builder
			flatten(v.Children, func(c any) { walk(c, &s) })
			followUps = append(followUps, s.String())
		case *eval.ToolGrant:
			if v.Tool != nil {
				grants = append(grants, "tool "+v.Tool.Name())
			}
		case *eval.MCPGrant:
			grants = append(grants, "mcp "+v.GrantName())
		case *eval.Skill:
			grants = append(grants, "skill "+v.Src)
		case *eval.Include:
			into.WriteString("[" + includeName(v) + "]")
		default:
			if s, ok := scalar(v); ok {
				into.WriteString(s)
				return
			}
			if c := b.node(v); c != nil {
				// It runs before the agent; its result joins the text.
				before = append(before, c)
				into.WriteString("[" + c.Label + "]")
			}
		}
	}
	flatten(a.Children, func(c any) { walk(c, &prompt) })
	if p := strings.TrimSpace(prompt.String()); p != "" {
		n.Details = append(n.Details, "prompt: "+preview(p))
	}
	for _, s := range system {
		if s = strings.TrimSpace(s); s != "" {
			n.Details = append(n.Details, "system: "+preview(s))
		}
	}
	for i, f := range followUps {
		n.Details = append(n.Details, fmt.Sprintf("follow-up %d: %s", i+1, preview(strings.TrimSpace(f))))
	}
	if len(grants) > 0 {
		sort.Strings(grants)
		n.Details = append(n.Details, "grants: "+strings.Join(grants, ", "))
	}
	if a.TimeoutMS > 0 {
		n.Details = append(n.Details, fmt.Sprintf("timeout: %d ms", a.TimeoutMS))
	}
	if len(before) == 0 {
		return n
	}
	seq := b.newNode(KindSequence, "", a.Position)
	seq.Children = append(before, n)
	return seq
}

// providerName names a node's provider, or the default one.
func providerName(p interface{ Name() string }, def string) string {
	if p != nil {
		return p.Name()
	}
	if def == "" {
		return "default"
	}
	return def + " (default)"
}

func includeName(v *eval.Include) string {
	if v.Src != "" {
		return v.Src
	}
	return v.Path
}

// schemaSummary is a schema's type and, for an object, its properties.
func schemaSummary(s *eval.Schema) string {
	doc := s.Document()
	t, _ := doc["type"].(string)
	if t == "" {
		t = "any"
	}
	props, _ := doc["properties"].(map[string]any)
	if len(props) == 0 {
		return t
	}
	return t + " {" + strings.Join(slices.Sorted(maps.Keys(props)), ", ") + "}"
}

// textOf is the literal text in children (nodes left out).
func textOf(children []any) string {
	var b strings.Builder
	flatten(children, func(v any) {
		if s, ok := scalar(v); ok {
			b.WriteString(s)
		}
	})
	return b.String()
}

// flatten calls fn for each value in v in order, descending into lists,
// fragments and blocks (a block is text with separation, so its nodes
// are steps like any other) and leaving out None and booleans.
func flatten(v any, fn func(any)) {
	switch v := v.(type) {
	case nil, bool:
	case []any:
		for _, c := range v {
			flatten(c, fn)
		}
	case *eval.Fragment:
		flatten(v.Children, fn)
	case *eval.Block:
		flatten(v.Children, fn)
	default:
		fn(v)
	}
}

// scalar is the text of a scalar renderable.
func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	return "", false
}

// previewRunes is the longest text a detail line shows.
const previewRunes = 48

// preview is s on one line, shortened to previewRunes.
func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= previewRunes {
		return s
	}
	r := []rune(s)
	return string(r[:previewRunes-1]) + "…"
}

// Walk calls fn for n and every node under it, parents first.
func (n *Node) Walk(fn func(*Node)) {
	fn(n)
	for _, c := range n.Children {
		c.Walk(fn)
	}
}

// budgetDetails lists the bounds of a budget() as its frame shows them.
func budgetDetails(bu eval.Budget) []string {
	var out []string
	if bu.Tokens > 0 {
		out = append(out, "tokens: "+strconv.FormatInt(bu.Tokens, 10))
	}
	if bu.CostUSD > 0 {
		out = append(out, "cost: "+eval.FormatUSD(bu.CostUSD))
	}
	if bu.ModelCalls > 0 {
		out = append(out, "model calls: "+strconv.FormatInt(bu.ModelCalls, 10))
	}
	if bu.ToolCalls > 0 {
		out = append(out, "tool calls: "+strconv.FormatInt(bu.ToolCalls, 10))
	}
	if bu.Wall > 0 {
		out = append(out, "wall: "+bu.Wall.String())
	}
	return out
}
