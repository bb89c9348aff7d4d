package analysis_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/analysis"
	"github.com/aml-go/aml/starlib/analysis/buildlint"
	"github.com/aml-go/aml/starlib/dockerstar"
	"github.com/aml-go/aml/starlib/fsstar"
	"github.com/aml-go/aml/starlib/remotestar"
	"github.com/aml-go/aml/starlib/s3star"
)

// opts has the extensions the aml command links.
var opts = &analysis.Options{Extensions: []*starlib.Extension{acpstar.New(acpstar.Options{}), fsstar.Extension, dockerstar.Extension, s3star.Extension, remotestar.Extension}, Lint: buildlint.Findings}

func errorsOf(f *analysis.File) []analysis.Diagnostic {
	var out []analysis.Diagnostic
	for _, d := range f.Diagnostics {
		if d.Severity == analysis.Error {
			out = append(out, d)
		}
	}
	return out
}

var goldenError = regexp.MustCompile(`(?m)^-- error --\n(.*)$`)

// onlyRunsKnow are the failing golden workflows whose failure a check
// cannot know from the source, by the reason it cannot: everything else
// that fails must be reported by the check exactly as the run reports
// it. A case that the check starts to report exactly must leave this
// list, so that it stays the truth.
var onlyRunsKnow = map[string]string{}

func init() {
	for reason, names := range map[string][]string{
		"what a provider's respond function or a tool's execute returns": {
			"agent_name_in_failure", "respond_fail", "respond_int_error", "respond_unknown_key",
			"structured_echo_needs_respond", "structured_missing_result", "structured_twin_needs_respond",
			"structured_validation_failure", "structured_evaluate_all", "context_in_respond", "evaluate_in_respond",
			"tool_call_in_respond", "tool_sibling_not_granted", "tool_double_encoded", "tool_input_error",
			"tool_input_normalization_errors", "tool_output_error", "tool_output_not_json", "tool_not_allowed",
		},
		"what a component body returns or does when it runs": {
			"component_body_fails", "component_evaluate_all_failure", "component_evaluate_workspace_in_sandbox",
			"component_name", "component_returns_dict", "context_required_missing", "cycle_component_evaluate",
			"cycle_component_self", "nested_evaluate_outside_scope", "nested_evaluate_read_only_sandbox",
			"nested_evaluate_second_workspace", "placement_component_agent_after_follow_up",
			"placement_component_text_after_follow_up", "placement_follow_up_component_in_sandbox", "trace_span_failure",
		},
		"a parallel() branch that fails when it runs": {
			"parallel_branch_failure", "parallel_list_flattened", "parallel_multiple_failures", "parallel_nested_failure",
			"parallel_none_bool_no_branch",
		},
		"the contents of files read at run time": {
			"include_directory", "include_errors", "include_oversized_outside", "skill_bad_name", "skill_duplicate",
			"skill_no_description", "skill_no_frontmatter", "skill_not_directory", "skill_with_link", "skill_wrong_name",
		},
		"how far the run goes before a limit": {
			"limit_max_agent_calls", "limit_max_depth_components", "limit_max_steps", "limit_max_steps_threads", "limit_max_prompt_bytes",
		},
		"what a command does": {"script_exit_code", "script_in_sandbox_exit"},
		"what a run spends, and the prices configure() reads when the run starts": {
			"budget_runaway", "budget_scope", "budget_usage_func", "budget_prices", "budget_prices_bad", "budget_rate_limits_bad",
		},
		"values computed by Starlark code (joins, appends, struct(), schema.*() builders)": {
			"file_path_too_long", "args_self_list", "struct_not_renderable", "schema_object_errors", "schema_optional_misuse",
			"top_level_failure",
		},
		"tools, which are values of define_tool() calls the check does not run": {
			"tool_define_errors", "tool_duplicate", "tool_call_top_level", "mcp_prefix_collision",
		},
		"whether a provider supports sandboxes": {"sandbox_agent_unsupported"},
		"which global is the entry (aml run --entry) and which file loads which": {
			"entry_main_with_params", "entry_missing_main", "entry_value_not_renderable", "configure_in_loaded_module",
			"names_did_you_mean_module",
		},
	} {
		for _, n := range names {
			onlyRunsKnow[n+".star"] = reason
		}
	}
}

// TestAgreesWithTheRuntime runs the check over the evaluator's golden
// workflows (testdata/eval, each with the error its run reports) and the
// examples:
//
//   - a workflow whose run succeeds gets no error (no false positive);
//   - a workflow whose run fails for a reason the source shows gets, among
//     its errors, the run's error exactly: the same message at the same
//     line and column (a load cycle, which the run reports in the module
//     that closes it, is reported at the load that leads into it);
//   - a workflow in onlyRunsKnow is not reported exactly (else it must
//     leave the list).
func TestAgreesWithTheRuntime(t *testing.T) {
	// The goldens were written running from their directory.
	t.Chdir("../../testdata/eval")
	stars, _ := filepath.Glob("*.star")
	if len(stars) < 100 {
		t.Fatalf("%d golden workflows found", len(stars))
	}
	var failing, exact int
	for _, star := range stars {
		golden, err := os.ReadFile(strings.TrimSuffix(star, ".star") + ".golden")
		if err != nil {
			continue
		}
		src, _ := os.ReadFile(star)
		f := analysis.Analyze(star, src, opts)
		errs := errorsOf(f)
		m := goldenError.FindSubmatch(golden)
		if m == nil {
			for _, d := range errs {
				t.Errorf("%s runs without error, but the check reports %s", star, d)
			}
			continue
		}
		failing++
		want := strings.TrimSpace(string(m[1]))
		var got []string
		found := false
		for _, d := range f.Diagnostics {
			if d.Severity != analysis.Error && d.Code != analysis.CodeNoProvider {
				continue
			}
			at := d.At()
			line := fmt.Sprintf("%s:%d:%d: %s", d.File, at.Line, at.Col, d.Message)
			got = append(got, line)
			found = found || line == want || sameCycle(want, d.Message)
		}
		reason, unknowable := onlyRunsKnow[star]
		switch {
		case found && unknowable:
			t.Errorf("%s is listed as known only by running it (%s), but the check reports it exactly: take it off the list", star, reason)
		case found:
			exact++
		case !unknowable:
			t.Errorf("%s: the run fails with\n  %s\nbut the check reports\n  %s", star, want, strings.Join(got, "\n  "))
		}
	}
	t.Logf("%d of %d failing golden workflows are reported exactly without running them; %d fail for reasons only a run knows", exact, failing, len(onlyRunsKnow))
	for _, dir := range []string{"../../examples", "../../skills", "../../stdlib"} {
		files, err := analysis.Files([]string{dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			src, _ := os.ReadFile(file)
			for _, d := range errorsOf(analysis.Analyze(file, src, opts)) {
				t.Errorf("example %s: %s", file, d)
			}
		}
	}
}

// sameCycle reports two load-cycle errors naming the same cycle (the
// runtime reports it at the load that closes it, the analysis at the
// load of the file analyzed that leads into it).
func sameCycle(a, b string) bool {
	cycle := func(s string) string {
		_, c, ok := strings.Cut(s, "load cycle: ")
		if !ok {
			return ""
		}
		c, _, _ = strings.Cut(c, " (loaded from")
		return c
	}
	return cycle(a) != "" && cycle(a) == cycle(b)
}

// TestDiagnostics: each kind of problem is found, with its code, the
// exact range of the offending token, and the runtime's words.
func TestDiagnostics(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("lib.star", "def helper():\n    return \"h\"\n")
	write("loop_a.star", "load(\"loop_b.star\", \"b\")\na = 1\n")
	write("loop_b.star", "load(\"loop_a.star\", \"a\")\nb = 1\n")
	if err := os.Mkdir(filepath.Join(dir, "sub.star"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src string
		code      string
		at        string // "line:col-line:col" of the range
		msg       string // a fragment of the message
	}{
		{"syntax", "def main(:\n", analysis.CodeSyntax, "1:11-1:11", "got ':', want ')'"},
		{"undefined", "def main():\n    return agnt(\"x\")\n", analysis.CodeUndefined, "2:12-2:16", "undefined: agnt (did you mean agent?)"},
		{"unknown keyword", "def main():\n    return agent(\"x\", modle = \"m\")\n", analysis.CodeUnknownKeyword, "2:23-2:28", `unexpected keyword argument "modle" (did you mean "model"?)`},
		{"duplicate keyword", "def main():\n    return sandbox(root = \".\", root = \"..\")\n", analysis.CodeResolve, "2:32-2:32", `keyword argument "root" is repeated`},
		{"too many", "def main():\n    return env(\"A\", \"b\", \"c\")\n", analysis.CodeTooMany, "2:26-2:29", "got 3 positional arguments, want at most 2"},
		{"missing", "x = use_context()\n", analysis.CodeMissingArgument, "1:5-1:16", `use_context: missing argument`},
		{"enum", "def main():\n    return sandbox(\"x\", access = \"rw\")\n", analysis.CodeBadValue, "2:34-2:38", `access must be "read-only" or "read-write", got "rw"`},
		{"enum suggestion", "def main():\n    return workspace(\"x\", write_concurrency = \"paralel\")\n", analysis.CodeBadValue, "2:47-2:56", `(did you mean "parallel"?)`},
		{"negative limit", "configure(max_depth = -1)\n", analysis.CodeBadValue, "1:23-1:25", "max_depth must be a non-negative integer"},
		{"permissions key", "def main():\n    return agent(\"x\", permissions = {\"netwrk\": False})\n", analysis.CodeBadValue, "2:38-2:46", `unknown permissions key "netwrk" (did you mean "network"?)`},
		{"load missing", "load(\"nope.star\", \"x\")\n", analysis.CodeLoadMissing, "1:6-1:17", "cannot load nope.star: cannot read module"},
		{"load directory", "load(\"sub.star\", \"x\")\n", analysis.CodeLoadDirectory, "1:6-1:16", "is a directory"},
		{"load symbol", "load(\"lib.star\", \"helpr\")\n", analysis.CodeLoadSymbol, "1:18-1:25", "load: name helpr not found in module lib.star (did you mean helper?)"},
		{"load std", "load(\"@std/nope\", \"x\")\n", analysis.CodeLoadMissing, "1:6-1:17", `unknown standard module "@std/nope"`},
		{"load cycle below", "load(\"loop_a.star\", \"a\")\n", analysis.CodeLoadCycle, "1:6-1:19", "cannot load loop_a.star: load cycle: loop_a.star -> loop_b.star -> loop_a.star"}, // as the runtime, which fails to load loop_a.star
		{"configure nested", "def main():\n    configure()\n    return \"x\"\n", analysis.CodeConfigure, "2:5-2:14", "configure() is only valid at top level"},
		{"configure twice", "configure()\nconfigure()\n", analysis.CodeConfigure, "2:1-2:10", "configure() may be called only once (first call at"},
		{"tool outside agent", "t = 1\ndef main():\n    return sandbox(tool(t))\n", analysis.CodePlacement, "3:20-3:27", "tool() is only valid inside agent()"},
		{"text after follow_up", "def helper():\n    return agent(\"x\", follow_up(\"y\"), \"z\")\n", analysis.CodePlacement, "2:12-2:43", "prompt text after the first follow_up()"},
		{"file without scope", "def main():\n    return file(\"x\", path = \"a.txt\")\n", analysis.CodePlacement, "2:12-2:37", "file() requires an enclosing workspace() or sandbox()"},
		{"not utf-8", "x = \"\xff\"\n", analysis.CodeNotUTF8, "1:6-1:6", "not UTF-8 text: byte 0xff at offset 5"},
		{"builtin rule", "def main():\n    return script(\"ls\", shell = \"sh\", cwd = \"../x\")\n", analysis.CodeInvalidCall, "2:12-2:52", `script: cwd: path "../x" leaves its root through ..`},
		{"dict key suggestion", "def main():\n    return workspace(\"x\", save = {\"retension\": 2})\n", analysis.CodeBadValue, "2:35-2:46", `unknown save key "retension" (did you mean "retention"?)`},
		{"structured", "def main():\n    return agent(\"x\", evaluate([\"y\", agent(\"z\")], schema = {\"type\": \"object\"}))\n", analysis.CodeStructured, "2:23-2:79", `collects exactly one agent() result`},
		{"top level evaluate", "x = evaluate(\"y\")\n", analysis.CodeOutsideComponent, "1:5-1:18", "evaluate() is only available while an AML component is active"},
		{"empty follow_up", "def main():\n    return agent(\"x\", follow_up(\" \", None))\n", analysis.CodePlacement, "2:23-2:43", "follow_up() must resolve to non-empty text"},
		{"second workspace", "def main():\n    return [workspace(\"a\"), workspace(\"b\")]\n", analysis.CodePlacement, "2:29-2:43", "only one workspace() may run per evaluation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(c.name, " ", "_")+".star", c.src)
			f := analysis.Analyze(path, []byte(c.src), &analysis.Options{NoLint: true})
			errs := errorsOf(f)
			if c.code == "" {
				if len(errs) != 0 {
					t.Fatalf("unexpected %v", errs)
				}
				return
			}
			for _, d := range errs {
				at := fmtRange(d)
				if d.Code == c.code && strings.Contains(d.Message, c.msg) {
					if at != c.at {
						t.Errorf("range %s, want %s (%s)", at, c.at, d)
					}
					return
				}
			}
			t.Fatalf("no %s diagnostic containing %q among %v", c.code, c.msg, f.Diagnostics)
		})
	}
}

func fmtRange(d analysis.Diagnostic) string {
	return fmt.Sprintf("%d:%d-%d:%d", d.Start.Line, d.Start.Col, d.End.Line, d.End.Col)
}

// TestLoadCycleThroughTheFile: a cycle that passes through the file is
// reported at its load, in the runtime's words.
func TestLoadCycleThroughTheFile(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.star")
	os.WriteFile(a, []byte("load(\"b.star\", \"b\")\na = b\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.star"), []byte("load(\"a.star\", \"a\")\nb = 1\n"), 0o644)
	src, _ := os.ReadFile(a)
	errs := errorsOf(analysis.Analyze(a, src, &analysis.Options{NoLint: true}))
	if len(errs) != 1 || errs[0].Code != analysis.CodeLoadCycle || errs[0].Message != "cannot load b.star: load cycle: a.star -> b.star -> a.star" {
		t.Fatalf("%v", errs)
	}
}

// TestLint: buildtools warnings come as warnings with their category as
// code and the first line of their message.
func TestLint(t *testing.T) {
	src := "load(\"@std/text\", \"dedent\")\n\ndef main():\n    unused = 1\n    return \"x\"\n"
	f := analysis.Analyze("w.star", []byte(src), &analysis.Options{Lint: buildlint.Findings})
	var codes []string
	for _, d := range f.Diagnostics {
		if d.Severity != analysis.Warning || strings.Contains(d.Message, "\n") {
			t.Errorf("%v", d)
		}
		codes = append(codes, d.Code)
	}
	if strings.Join(codes, ",") != "load,unused-variable" {
		t.Fatalf("codes %v: %v", codes, f.Diagnostics)
	}
	// Without a linter, the analysis's own warnings remain.
	codes = nil
	for _, d := range analysis.Analyze("w.star", []byte(src), nil).Diagnostics {
		codes = append(codes, d.Code)
	}
	if strings.Join(codes, ",") != "unused-variable" {
		t.Fatalf("without Lint: codes %v", codes)
	}
}

// TestSourceNotWritten: neither the analysis nor the formatter writes to
// the source slice, not even to its spare capacity, since an editor's
// document text is read by several requests at once.
func TestSourceNotWritten(t *testing.T) {
	text := "def a( ):\n  return 1\n"
	buf := make([]byte, len(text), len(text)+8)
	copy(buf, text)
	spare := buf[len(buf):cap(buf)]
	for i := range spare {
		spare[i] = '#'
	}
	analysis.Analyze("f.star", buf, nil)
	if _, err := analysis.Format("f.star", buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != text || strings.Trim(string(spare), "#") != "" {
		t.Fatalf("the source was written: %q, spare capacity %q", buf, spare)
	}
}

// TestUnusedVariables: what is assigned and never read is reported once,
// at its first assignment; parameters, "_" locals, loop variables and
// variables read by a nested function are not; private top-level
// definitions nothing reads are; a disable comment silences a line.
func TestUnusedVariables(t *testing.T) {
	src := `_PRIVATE = 1
_USED = 2
PUBLIC = 3

def _helper():
    return _USED

def _dead():
    return 1

def main(param, other = 1):
    unused = 1
    unused = 2
    _ignored = 3
    kept = 4  # buildifier: disable=unused-variable
    captured = "x"
    def inner():
        return captured
    for i in [1]:
        pass
    total = [j for j in [1]]
    return inner, total, _helper
`
	f := analysis.Analyze("u.star", []byte(src), nil)
	var got []string
	for _, d := range f.Diagnostics {
		if d.Code == analysis.CodeUnusedVariable {
			got = append(got, fmt.Sprintf("%d:%d %s", d.Start.Line, d.Start.Col, d.Message))
		}
	}
	want := []string{
		`1:1 Variable "_PRIVATE" is unused. Please remove it.`,
		`8:5 Function "_dead" is unused. Please remove it.`,
		`12:5 Variable "unused" is unused. Please remove it.`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unused variables:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoFalseAlarms: what only a run can decide is never reported. Each
// source below runs (or may run) without the failure the new rules look
// for, because a value, a nesting or a path through the code is not
// known without running it.
func TestNoFalseAlarms(t *testing.T) {
	const p = "configure(agent_provider = deterministic_agent(), sandbox_provider = local_sandbox(), workspace_provider = deterministic_workspace())\n\n"
	for name, src := range map[string]string{
		"a helper's sandbox nested at run time": "def lane():\n    return sandbox(script(\"ls\", shell = \"sh\"))\n\ndef main():\n    return sandbox(lane(), provider = local_sandbox())\n",
		"a provider in a variable":              "p = deterministic_agent()\n\ndef main():\n    return agent(\"x\", provider = p)\n",
		"providers spread from a dict":          "opts = {\"agent_provider\": deterministic_agent()}\nconfigure(**opts)\n\ndef main():\n    return agent(\"x\")\n",
		"a library without an entry":            "def review(x):\n    return agent(x)\n",
		"evaluate() in a function":              p + "def summary():\n    return evaluate(agent(\"x\"))\n\ndef main():\n    return component(summary)()\n",
		"evaluate() in a comprehension":         p + "xs = [evaluate(a) for a in []]\n\ndef main():\n    return \"x\"\n",
		"evaluate() after and":                  p + "ok = False and evaluate(agent(\"x\"))\n\ndef main():\n    return \"x\"\n",
		"evaluate() in a branch":                p + "v = evaluate(agent(\"x\")) if False else \"y\"\n\ndef main():\n    return v\n",
		"a command not known":                   p + "cmd = \"ls\"\n\ndef main():\n    return script(command = cmd)\n",
		"a descriptor not known":                p + "docs = define_mcp_server(name = \"docs\", transport = {\"type\": \"stdio\", \"command\": \"d\"})\n\ndef main():\n    return agent(\"x\", mcp(use = docs))\n",
		"a save policy value not known":         p + "ON = \"always\"\n\ndef main():\n    return workspace(\"x\", save = {\"on\": ON})\n",
		"a path not known":                      p + "up = \"..\"\n\ndef main():\n    return sandbox(file(\"x\", path = up + \"x\"), access = \"read-write\")\n",
		"a child not known":                     p + "data = {\"a\": 1}\n\ndef main():\n    return agent(\"x\", data)\n",
		"workspaces in parallel branches":       p + "def main():\n    return parallel(workspace(\"a\"), workspace(\"b\"))\n",
		"workspaces in two returns":             p + "def main():\n    if len(\"x\") > 3:\n        return workspace(\"a\")\n    return workspace(\"b\")\n",
		"a follow_up() with computed text":      p + "def main():\n    t = \"more\"\n    return agent(\"x\", follow_up(t))\n",
		"a schema not known around text":        p + "S = {\"type\": \"object\"}\n\ndef main():\n    return agent(\"x\", evaluate(agent(\"y\"), schema = S))\n",
		"a structured evaluate of a helper":     p + "def lane():\n    return agent(\"y\")\n\nL = component(lambda: evaluate(lane(), schema = {\"type\": \"object\"}))\n\ndef main():\n    return L()\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := analysis.Analyze("w.star", []byte(src), opts)
			for _, d := range f.Diagnostics {
				if d.Severity == analysis.Error || d.Code == analysis.CodeNoProvider {
					t.Errorf("%s\n%s", d, src)
				}
			}
		})
	}
}

// TestCompleteDictKeys: inside a dict written as the argument of a
// parameter with known keys, the keys not given yet (quoted, or bare
// inside a quote), and a key's strings at its value; nothing special in
// other dicts.
func TestCompleteDictKeys(t *testing.T) {
	q := &analysis.Query{}
	for _, c := range []struct{ src, want string }{
		{`agent("x", permissions = {|})`, `"filesystem" "network" "shell"`},
		{`agent("x", permissions = {"network": False, |})`, `"filesystem" "shell"`},
		{`agent("x", permissions = {"sh|`, `shell`},
		{`agent("x", permissions = {"network": False, "f|": 1})`, `filesystem`},
		{`agent("x", permissions = {"filesystem": |})`, `"read-only" "read-write"`},
		{`agent("x", permissions = {"filesystem": "read-w|`, `read-write`},
		{`workspace("w", save = {"on": "always", |`, `"include" "exclude" "gitignore" "retention"`},
		{`define_mcp_server(name = "d", transport = {"type": "s|`, `stdio streamable-http`},
		{`evaluate(agent("x"), {"ty|`, `type`},
		{`x = {"permissions": {|}}`, ``},
	} {
		off := strings.Index(c.src, "|")
		src := []byte(strings.Replace(c.src, "|", "", 1))
		items, _ := q.Complete("w.star", nil, src, off)
		var labels []string
		for _, it := range items {
			if it.Kind == analysis.KindField || it.Kind == analysis.KindValue {
				labels = append(labels, it.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.src, got, c.want)
		}
	}
	// A key's item documents the key, not the whole parameter.
	src := `workspace("w", save = {})`
	items, _ := q.Complete("w.star", nil, []byte(src), strings.Index(src, "}"))
	for _, it := range items {
		if it.Label == `"retention"` && !strings.HasPrefix(it.Doc, "How many revisions to keep") {
			t.Errorf("the retention key is documented as %q", it.Doc)
		}
	}
}

// TestParsedTreeReused: Analyze over a tree ParseFile made (as the
// language server passes it) reports what it reports parsing the source
// itself, for every golden workflow; a tree of another source is not
// used.
func TestParsedTreeReused(t *testing.T) {
	t.Chdir("../../testdata/eval")
	stars, _ := filepath.Glob("*.star")
	if len(stars) < 100 {
		t.Fatalf("%d golden workflows found", len(stars))
	}
	withTree := func(p *analysis.File) *analysis.Options {
		o := *opts
		o.Parsed = p
		return &o
	}
	for _, star := range stars {
		src, _ := os.ReadFile(star)
		want := fmt.Sprint(analysis.Analyze(star, src, opts).Diagnostics)
		parsed := analysis.ParseFile(star, src, opts.Extensions...)
		if got := fmt.Sprint(analysis.Analyze(star, src, withTree(parsed)).Diagnostics); got != want {
			t.Errorf("%s over its parsed tree:\n  %s\nparsing it:\n  %s", star, got, want)
		}
		// The tree is only read: a second analysis over it agrees too.
		if got := fmt.Sprint(analysis.Analyze(star, src, withTree(parsed)).Diagnostics); got != want {
			t.Errorf("%s over its tree a second time:\n  %s\nparsing it:\n  %s", star, got, want)
		}
	}
	// A tree of another text (an older version of the document) is left
	// alone: the undefined name is found in the new text.
	old := analysis.ParseFile("a.star", []byte("x = 1\n"), opts.Extensions...)
	f := analysis.Analyze("a.star", []byte("x = y\n"), withTree(old))
	if len(f.Diagnostics) == 0 || f.Diagnostics[0].Code != analysis.CodeUndefined {
		t.Errorf("a tree of another text was used: %v", f.Diagnostics)
	}
}
