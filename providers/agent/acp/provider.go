package acp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aml-go/aml/eval"
)

// Config configures a Provider. The zero value is not usable: Command is
// required.
type Config struct {
	// Name is the provider's name in traces and errors; "" means "acp".
	Name string
	// Command is the ACP agent executable: a name looked up on PATH (on
	// the host, or by the sandbox runtime inside a sandbox) or a path.
	Command string
	// Args are literal arguments (never passed through a shell).
	Args []string
	// Env adds environment variables to the agent process. Values may be
	// credentials: they never reach traces or errors.
	Env map[string]string
	// WorkingDirectory is the session cwd outside a sandbox; "" means the
	// process working directory. Inside a sandbox the sandbox's effective
	// cwd is used instead.
	WorkingDirectory string
	// AuthMethodID, when set, is sent with authenticate after initialize.
	AuthMethodID string
	// InitialPromptPrefix is prepended to the first turn, joined with a
	// blank line.
	InitialPromptPrefix string
	// Profile, when set, prepares each session's launch from the
	// effective cwd, a fresh invocation-private state directory and the
	// request; Command, Args, Env, AuthMethodID and InitialPromptPrefix
	// are then only its defaults (see Launch). Built-in agent profiles
	// (opencode, codex, …) are Profiles.
	Profile func(ctx context.Context, lc LaunchContext) (*Launch, error)
	// NativeSkills reports that the profile maps staged skills into the
	// agent's own discovery (see eval.NativeSkills); otherwise AML adds
	// the metadata-only system fragment.
	NativeSkills bool
	// Relay is the command (and leading arguments) of a stdio MCP relay to
	// the tool bridge, for agents that do not advertise HTTP MCP support:
	// typically the aml executable and "mcp-relay". nil means no relay:
	// such an agent then cannot receive tools or structured output.
	Relay []string
	// ClientVersion is the version AML announces to the agent in
	// initialize and on the tool bridge; "" means "dev".
	ClientVersion string
	// HandshakeTimeout bounds each request of the session handshake
	// (initialize, authenticate, session/new, set_config_option); 0 means
	// DefaultHandshakeTimeout. Turns are bounded by the agent's
	// timeout_ms instead.
	HandshakeTimeout time.Duration
	// Meter routes the model calls of sessions through AML's model
	// gateway (package gateway), which meters them against the session's
	// budgets (eval.MeteredProvider): the Profile must route every model
	// endpoint its agent uses with LaunchContext.Route. A session in a
	// sandbox (an eval.GuestRuntime with aml) reaches the gateway through
	// aml model-relay, which its launch is wrapped in; in another sandbox
	// it is not metered, and its turns are counted from the agent's usage
	// reports.
	Meter bool
	// MeterFor, when set, says which sessions of a metering profile are
	// metered (those whose model endpoint it can route); nil meters all.
	MeterFor func(req *eval.AgentRequest) bool
	// ReportsCost says that the agent reports its cost in ACP
	// usage_update notifications (eval.CostReporter): a cost budget then
	// needs no price for its model, and an unmetered session's reported
	// cost is checked against its budgets as each report arrives.
	ReportsCost bool
	// Model is the model a session uses when its agent() names none (a
	// profile's model=), or ""; budgets price such sessions by it.
	Model string
}

// DefaultModel implements eval.ModelDefaulter (Config.Model).
func (p *Provider) DefaultModel() string { return p.cfg.Model }

// ReportsCost implements eval.CostReporter (Config.ReportsCost).
func (p *Provider) ReportsCost() bool { return p.cfg.ReportsCost }

// Meters implements eval.MeteredProvider: sessions of a metering profile
// (that MeterFor accepts) on the host, or in a sandbox whose runtime
// shares a directory with the host and has aml (eval.GuestRuntime).
func (p *Provider) Meters(req *eval.AgentRequest, sandbox *eval.SandboxSession) bool {
	if !p.cfg.Meter || (p.cfg.MeterFor != nil && !p.cfg.MeterFor(req)) {
		return false
	}
	if sandbox != nil {
		// In a sandbox that shares a directory with the host and runs
		// aml (its tool relay), through aml model-relay.
		_, _, err := guestRelay(sandbox)
		return err == nil
	}
	return true
}

// DefaultHandshakeTimeout is the bound of each handshake request when
// Config.HandshakeTimeout is 0.
const DefaultHandshakeTimeout = time.Minute

// Provider runs authored agent() sessions against an ACP agent process. It
// implements eval.SessionProvider and eval.SandboxCompatible, and is safe
// for concurrent use: every session owns its own process.
type Provider struct {
	cfg Config
}

var (
	_ eval.SessionProvider   = (*Provider)(nil)
	_ eval.SandboxCompatible = (*Provider)(nil)
	_ eval.ObjectToolInputs  = (*Provider)(nil)
	_ eval.NativeSkills      = (*Provider)(nil)
)

// NativeSkillDiscovery implements eval.NativeSkills.
func (p *Provider) NativeSkillDiscovery() bool { return p.cfg.NativeSkills }

// RequiresObjectToolInput implements eval.ObjectToolInputs: MCP passes
// tool input as named arguments, so granted tools must take objects.
func (p *Provider) RequiresObjectToolInput() bool { return true }

// New validates cfg and returns a provider.
func New(cfg Config) (*Provider, error) {
	if err := checkLaunch(cfg.Command, cfg.Args, cfg.Env); err != nil {
		return nil, fmt.Errorf("provider %q: %w", cmp.Or(cfg.Name, "acp"), err)
	}
	if cfg.Name == "" {
		cfg.Name = "acp"
	}
	if cfg.ClientVersion == "" {
		cfg.ClientVersion = "dev"
	}
	cfg.Args = slices.Clone(cfg.Args)
	cfg.Env = maps.Clone(cfg.Env)
	cfg.Relay = slices.Clone(cfg.Relay)
	return &Provider{cfg: cfg}, nil
}

// Name implements eval.AgentProvider.
func (p *Provider) Name() string { return p.cfg.Name }

// SupportsSandbox implements eval.SandboxCompatible: an ACP agent runs in
// any sandbox whose runtime can spawn processes.
func (p *Provider) SupportsSandbox(s *eval.SandboxSession) bool {
	return s != nil && s.Runtime != nil
}

// Run implements eval.AgentProvider for callers that do not drive turns
// themselves: it opens a session, runs every turn and closes it.
func (p *Provider) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (resp *eval.AgentResponse, err error) {
	s, err := p.OpenSession(ctx, req, exec)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if cerr := s.Close(cctx); cerr != nil {
			err = errors.Join(err, cerr)
			resp = nil
		}
	}()
	for _, turn := range req.Turns() {
		if resp, err = s.RunTurn(ctx, turn); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// OpenSession implements eval.SessionProvider: it launches the agent,
// initializes the connection and creates the ACP session.
func (p *Provider) OpenSession(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (eval.AgentSession, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	servers, err := mcpDescriptors(p.cfg.Name, req.MCPServers)
	if err != nil {
		return nil, err
	}
	bridgeName := req.ToolServerName()
	for _, t := range req.Tools {
		if t.Name == SubmitToolName {
			return nil, fmt.Errorf("tool name %q is reserved for structured-output submission; rename the tool", SubmitToolName)
		}
	}
	if err := req.CheckToolServer(); err != nil {
		return nil, err
	}
	var trace eval.TraceEmitter = nopTrace{}
	if exec != nil && exec.Trace != nil {
		trace = exec.Trace
	}
	s := &session{p: p, req: req, trace: trace, servers: servers, bridgeName: bridgeName}
	if exec != nil && exec.Sandbox != nil {
		s.sandbox = exec.Sandbox
	}
	if exec != nil {
		s.evalDir = exec.WorkingDirectory
		s.runID = exec.RunID
		if p.Meters(req, exec.Sandbox) {
			s.meter = exec.Meter
		} else {
			s.watch = exec.Watch
		}
	}
	if err := s.open(ctx); err != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		return nil, errors.Join(err, s.Close(cctx))
	}
	return s, nil
}

// localCwd resolves the session cwd outside a sandbox: the profile's
// working directory, else the evaluation's (AgentExecution), else the
// process's.
func (p *Provider) localCwd(evaluation string) (string, error) {
	dir := p.cfg.WorkingDirectory
	if dir == "" {
		dir = evaluation
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("resolving the working directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving working directory %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolving working directory %q: %w", dir, err)
	}
	return real, nil
}

// nopTrace discards events.
type nopTrace struct{}

func (nopTrace) Event(string, map[string]any, map[string]any) {}
func (nopTrace) CapturesContent() bool                        { return false }

// checkLaunch is the one rule for what launches an agent process: a
// non-empty command, and no NUL byte in it, its arguments or the
// environment, whose names must not contain "=". acp.New applies it to
// the configuration and every session to the launch its profile
// prepared.
func checkLaunch(command string, args []string, env map[string]string) error {
	if strings.TrimSpace(command) == "" {
		return errors.New("command must be a non-empty executable name or path")
	}
	if strings.IndexByte(command, 0) >= 0 {
		return errors.New("command must not contain NUL bytes")
	}
	for i, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("args[%d] must not contain NUL bytes", i)
		}
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q must be non-empty without '=' or NUL", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("env %s must not contain NUL bytes", k)
		}
	}
	return nil
}

// cleanupContext is ctx without its cancellation, bounded by
// eval.CleanupTimeout: cleanup runs even after cancellation, never
// forever.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), eval.CleanupTimeout)
}
