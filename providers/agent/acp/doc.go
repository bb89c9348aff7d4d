// Package acp is AML's shared Agent Client Protocol session engine: it
// runs authored agent() sessions against any ACP agent executable
// (github.com/coder/acp-go-sdk on the client side).
//
// One session is one agent process: launched by the trusted local
// launcher in its own process group, or inside a sandbox through the
// sandbox runtime's Spawn (never falling back to the host). The engine
// sends initialize, authenticate when configured, session/new at the
// effective cwd with the granted MCP servers, then the initial prompt and
// each follow-up as sequential session/prompt turns. Assistant text is
// collected from agent_message_chunk updates; messages are grouped by
// messageId when every chunk carries one. Permission requests are
// answered from the agent's AML permissions (see Allows). Cancellation
// sends session/cancel, and cleanup kills the process tree and drains
// every stream before the session is closed.
//
// The authored system text, which ACP has no field for, becomes a
// first-turn prelude inside literal <SYSTEM> tags.
package acp

// Version is the client version announced in initialize.
var Version = "dev"
