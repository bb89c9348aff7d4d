package temporal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal"
)

// keyedAgent answers with its key, which its factory took from env().
type keyedAgent struct{ name, key string }

func (a *keyedAgent) Name() string { return a.name }
func (a *keyedAgent) Run(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	return &eval.AgentResponse{Text: a.name + "(" + a.key + "):" + req.Prompt}, nil
}

// keyedExtension predeclares keyed_agent(name, key): a provider factory
// of the kind acp_agent() is, which workflows call at their top level.
var keyedExtension = &starlib.Extension{Name: "keyed", Builtins: []*starlib.Builtin{{
	Name: "keyed_agent", Group: "providers", Doc: "A test provider.",
	Params: []starlib.Param{{Name: "name", Type: "str"}, {Name: "key", Type: "str"}},
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		return &starlib.AgentProviderValue{Provider: &keyedAgent{name: c.Str("name"), key: c.Str("key")}}, nil
	},
}}}

// TestWorkerMakesTheWorkflowsProvider: a session with a provider that the
// workflow made at its top level runs on the worker with the provider the
// worker makes from the bundle, with the worker's env() values: the
// credential never passes through the workflow.
func TestWorkerMakesTheWorkflowsProvider(t *testing.T) {
	src := `first = keyed_agent(name = "first", key = env("KEY", "none"))
second = keyed_agent(name = "second", key = "fixed")
configure(agent_provider = second)

def main():
    return [agent("a", provider = first), " ", agent("b")]
`
	dir := t.TempDir()
	b := packSource(t, dir, "keyed.star", src)
	workerEnv := func(name string) (string, bool) {
		if name == "KEY" {
			return "worker-secret", true
		}
		return "", false
	}
	env := testEnv(temporal.Options{Extensions: []*starlib.Extension{keyedExtension}, Env: workerEnv})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if want := "first(worker-secret):a second(fixed):b"; res.Text != want {
		t.Fatalf("text %q, want %q", res.Text, want)
	}

	// A provider made in a component body travels as its factory call,
	// its env() values as tokens the worker fills from its own.
	src = "def main():\n    return agent(\"x\", provider = keyed_agent(name = \"late\", key = env(\"KEY\", \"none\")))\n"
	b = packSource(t, dir, "keyed.star", src)
	env = testEnv(temporal.Options{Extensions: []*starlib.Extension{keyedExtension}, Env: workerEnv})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a provider made in a component body: %v", err)
	}
	if err := env.GetWorkflowResult(&res); err != nil || res.Text != "late(worker-secret):x" {
		t.Fatalf("a provider made in a component body: %q, %v", res.Text, err)
	}
}

// toolAgent calls every tool it is granted with {"n": <prompt length>}
// and answers with the results, as a model that uses its tools would.
type toolAgent struct{}

func (toolAgent) Name() string { return "caller" }
func (toolAgent) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	var out []string
	for _, t := range req.Tools {
		v, err := t.Call(ctx, map[string]any{"n": len(req.Prompt)})
		if err != nil {
			out = append(out, t.Name+" failed: "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("%s=%v", t.Name, v))
	}
	return &eval.AgentResponse{Text: strings.Join(out, ",")}, nil
}

// providerExtension predeclares name(), a factory of the provider p that
// takes no arguments.
func providerExtension(name, doc string, p eval.AgentProvider) *starlib.Extension {
	return &starlib.Extension{Name: name, Builtins: []*starlib.Builtin{{
		Name: name, Group: "providers", Doc: doc,
		Impl: func(c *starlib.Call) (starlark.Value, error) {
			return &starlib.AgentProviderValue{Provider: p}, nil
		},
	}}}
}

var callerExtension = providerExtension("caller_agent", "A test provider that calls its tools.", toolAgent{})

// TestWorkerRunsStarlarkTools: a tool defined at the top level of the
// workflow, granted to an agent whose session runs on a worker, runs on
// that worker (its Starlark execute function, with input validation and
// the worker's env() values); a tool defined in a component body is
// refused with an error that says why.
func TestWorkerRunsStarlarkTools(t *testing.T) {
	src := `def _double(input):
    return {"twice": input["n"] * 2, "key": env("KEY", "none")}

double = define_tool(name = "double", description = "Doubles n.", input = schema.object(n = schema.integer()), execute = _double)
strict = define_tool(name = "strict", description = "Wants a string.", input = schema.object(n = schema.string()), execute = lambda input: "never")
caller = caller_agent()

def main():
    return agent("four", tool(double), tool(strict), provider = caller)
`
	dir := t.TempDir()
	b := packSource(t, dir, "tools.star", src)
	workerEnv := func(name string) (string, bool) { return map[string]string{"KEY": "worker"}[name], name == "KEY" }
	env := testEnv(temporal.Options{Extensions: []*starlib.Extension{callerExtension}, Env: workerEnv})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "double=map[key:worker twice:8]") || !strings.Contains(res.Text, `strict failed:`) {
		t.Fatalf("text %q", res.Text)
	}

	src = `caller = caller_agent()

def main():
    late = define_tool(name = "late", description = "Made late.", execute = lambda input: "x")
    return agent("x", tool(late), provider = caller)
`
	b = packSource(t, dir, "tools.star", src)
	env = testEnv(temporal.Options{Extensions: []*starlib.Extension{callerExtension}})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	// A tool defined in a component body is relayed to the workflow
	// through the worker's client (TestComponentToolsOnServer); the test
	// environment's workers have none, and say so.
	res = temporal.RunResult{}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&res); err != nil || !strings.Contains(res.Text, `late failed: tool "late" was defined in a component body, and this worker has no Temporal client`) {
		t.Fatalf("a tool defined in a component body, without a client: %q, %v", res.Text, err)
	}
}

// mcpAgent answers with the MCP servers it is granted: each name, and
// for a configured one its command and its TOKEN variable.
type mcpAgent struct{}

func (mcpAgent) Name() string { return "mcp-lister" }
func (mcpAgent) Run(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	var out []string
	for _, m := range req.MCPServers {
		if m.Server == nil {
			out = append(out, m.Name+"(native)")
			continue
		}
		out = append(out, fmt.Sprintf("%s(%s %s)", m.Name, m.Server.Transport.Command, m.Server.Transport.Env["TOKEN"]))
	}
	return &eval.AgentResponse{Text: strings.Join(out, ",")}, nil
}

var mcpExtension = providerExtension("mcp_lister_agent", "A test provider that lists its MCP servers.", mcpAgent{})

// TestWorkerGrantsMCPServers: an MCP server defined at the top level and
// granted to an agent reaches the session on the worker with the
// transport the worker's environment makes; a provider-native server
// travels by name; one defined in a component body travels as its
// descriptor, its env() values as tokens the worker fills.
func TestWorkerGrantsMCPServers(t *testing.T) {
	src := `files = define_mcp_server(name = "files", transport = {"type": "stdio", "command": "mcp-files", "env": {"TOKEN": env("TOKEN", "none")}})
lister = mcp_lister_agent()

def main():
    return agent("x", mcp(use = files), mcp(name = "github"), provider = lister)
`
	dir := t.TempDir()
	b := packSource(t, dir, "mcp.star", src)
	workerEnv := func(name string) (string, bool) { return "worker-token", name == "TOKEN" }
	env := testEnv(temporal.Options{Extensions: []*starlib.Extension{mcpExtension}, Env: workerEnv})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Text != "files(mcp-files worker-token),github(native)" {
		t.Fatalf("text %q", res.Text)
	}

	src = `lister = mcp_lister_agent()

def main():
    late = define_mcp_server(name = "late", transport = {"type": "stdio", "command": "x", "env": {"TOKEN": env("TOKEN", "none")}})
    return agent("x", mcp(use = late), provider = lister)
`
	b = packSource(t, dir, "mcp.star", src)
	env = testEnv(temporal.Options{Extensions: []*starlib.Extension{mcpExtension}, Env: workerEnv})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	res = temporal.RunResult{}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("an MCP server defined in a component body: %v", err)
	}
	if err := env.GetWorkflowResult(&res); err != nil || res.Text != "late(x worker-token)" {
		t.Fatalf("an MCP server defined in a component body: %q, %v", res.Text, err)
	}
}
