// Package acp is AML's shared Agent Client Protocol session engine: it
// runs authored agent() sessions against any ACP agent executable
// (github.com/coder/acp-go-sdk on the client side). The built-in agent
// profiles (opencode, codex, copilot, glm, pi) are Profiles over it.
//
// One session is one agent process: launched on the host by AML's host
// runner (internal/hostexec) in its own process group, or inside a
// sandbox through the sandbox runtime's Spawn (never falling back to the
// host). The engine
// sends initialize, authenticate when configured, session/new at the
// effective cwd with the granted MCP servers and the AML tool bridge, the
// profile's session configuration options, then the initial prompt and
// each follow-up as sequential session/prompt turns. Assistant text is
// collected from agent_message_chunk updates; messages are grouped by
// messageId when every chunk carries one. Permission requests are
// answered from the agent's AML permissions (see Allows), and calls to
// granted tools and MCP servers are allowed. Cancellation sends
// session/cancel, and cleanup kills the process tree, drains every
// stream, closes the bridge and removes the private state directory
// before the session is closed.
//
// The tool bridge is one invocation-scoped MCP server
// (github.com/modelcontextprotocol/go-sdk) named by the runtime's tool
// prefix: streamable HTTP on loopback with a per-invocation bearer
// secret, or RunRelay (aml mcp-relay) over stdio for agents that attach
// only stdio servers. It exposes the agent's Starlark tools, validated as
// in component code, and for a schema-bearing final turn the submission
// tool aml_submit_result, with one repair prompt when the turn ends
// without a valid submission.
//
// Metering: a profile with Config.Meter points its agent's model
// endpoints at routes of AML's model gateway (package gateway) through
// LaunchContext.Route, and the session charges every model call to the
// evaluator's SpendMeter (eval.MeteredProvider): a call a budget refuses
// never leaves, one that crosses a budget cancels the turn. In a sandbox
// the launch runs under RunModelRelay (aml model-relay), which carries a
// loopback port of the sandbox to the gateway's socket in the directory
// the sandbox shares with the host.
//
// The authored system text, which ACP has no field for, becomes a
// first-turn prelude inside literal <SYSTEM> tags unless the profile
// delivers it as configuration.
//
// Provider, and each session it opens, are safe for concurrent use as the
// eval contracts require; the test double acptest is a scriptable fake
// agent speaking the real protocol.
package acp
