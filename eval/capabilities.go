package eval

// The optional capabilities a provider or trace sink may implement beside
// its contract; the evaluator looks for them with a type assertion. The
// package documentation lists them with the contracts.

import "context"

// SandboxCompatible is an optional AgentProvider capability: inside an
// active sandbox the evaluator runs an agent only when its provider
// implements it and SupportsSandbox accepts the effective session.
type SandboxCompatible interface {
	SupportsSandbox(s *SandboxSession) bool
}

// SessionProvider is an optional AgentProvider capability: the provider
// keeps one retained session per agent() node and lets the evaluator drive
// the turns, so that every turn gets its own agent.turn span and cleanup its
// own agent.cleanup span. When a provider implements it, the evaluator
// calls OpenSession instead of Run.
type SessionProvider interface {
	AgentProvider
	// OpenSession opens the session for req. The evaluator then calls
	// RunTurn once per turn, in order, and Close exactly once.
	OpenSession(ctx context.Context, req *AgentRequest, exec *AgentExecution) (AgentSession, error)
}

// NativeSkills is an optional AgentProvider capability: a provider whose
// NativeSkillDiscovery returns true maps the staged skills into its own
// discovery mechanism. Every other provider receives a short system
// fragment naming each skill, its description and its SKILL.md path.
type NativeSkills interface {
	NativeSkillDiscovery() bool
}

// ObjectToolInputs is an optional AgentProvider capability: providers that
// pass tool input as named arguments (every ACP provider) require each
// granted tool's input schema to accept only objects.
type ObjectToolInputs interface {
	RequiresObjectToolInput() bool
}

// InProcess is an optional AgentProvider capability: a provider whose
// InProcess returns true computes its results inside the process and
// touches nothing outside it (the deterministic provider), so a journaled
// evaluation need not make its records durable before calling it: a
// crash before the next sync loses only results that replay computes
// again.
type InProcess interface {
	InProcess() bool
}

// ContentCapturer is an optional TraceSink capability. A sink whose
// CaptureContent returns true also receives sensitive content attributes
// (prompts, results, error messages); every other sink gets metadata only.
type ContentCapturer interface {
	CaptureContent() bool
}
