package acp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/scratch"
)

// LaunchContext is what a Profile sees when it prepares one session.
type LaunchContext struct {
	// Cwd is the effective session cwd as the agent sees it (absolute).
	Cwd string
	// StateDir is a fresh invocation-private directory as the agent sees
	// it, removed after the session: for the agent's database, config,
	// caches and credentials files.
	StateDir string
	// Request is the resolved agent request (read-only).
	Request *eval.AgentRequest
	// Local is true on the host and false inside a sandbox, where the
	// host environment is not inherited.
	Local bool
	// Bridge describes the AML tool bridge when the session has one (the
	// agent's tools or structured output), for profiles that attach MCP
	// servers through their own configuration; nil otherwise.
	Bridge *BridgeInfo
	// Route returns the base URL the agent must use instead of a model
	// endpoint's (an absolute http or https base URL, such as
	// "https://api.openai.com/v1"): with metering on (Config.Meter, on
	// the host), a route of AML's model gateway that meters the session's
	// calls to it; otherwise upstream itself. It is never nil.
	Route func(upstream string) (string, error)
}

// BridgeInfo is how an agent reaches the AML tool bridge over HTTP.
type BridgeInfo struct {
	// Name is the MCP server name (the tool prefix).
	Name string
	// URL is the streamable-HTTP endpoint on loopback.
	URL string
	// Authorization is the header value the bridge requires; it is a
	// secret: write it only to private launch files or environment.
	Authorization string
	// Relay, for an agent in a sandbox apart from the host (which cannot
	// reach URL), is the command in the sandbox that carries the bridge
	// over stdio, and RelayEnv its environment (which holds the bearer
	// secret): configure the bridge as a stdio MCP server with them.
	Relay    []string
	RelayEnv map[string]string
}

// ConfigSetting is one session configuration option a profile sets with
// session/set_config_option after session/new. It is matched by ID, else
// by Category, against the options the agent advertises; a missing option
// or a value the option does not advertise fails the session.
type ConfigSetting struct {
	ID       string
	Category string
	// Value is a string (a select option's value) or a bool.
	Value any
}

// Launch is a profile's plan for one session.
type Launch struct {
	// Command and Args start the agent (literal arguments).
	Command string
	Args    []string
	// Env adds environment variables; values never reach traces or
	// errors.
	Env map[string]string
	// Files are written below the state directory before launch.
	Files []LaunchFile
	// AuthMethodID, when set, is sent with authenticate.
	AuthMethodID string
	// InitialPromptPrefix is prepended to the first turn.
	InitialPromptPrefix string
	// CredentialHint, when set, is added to every failure of the session
	// (not to cancellation): the profile found no credential for the
	// model and says what to set. CredentialHint returns it.
	CredentialHint string
	// ModelHandled reports that the launch already applies the request's
	// model; otherwise a request with a model fails closed.
	ModelHandled bool
	// StructuredInstruction replaces the default instruction appended to
	// a schema-bearing final turn (and repeated by the repair prompt), for
	// agents that name the submission tool differently.
	StructuredInstruction string
	// Configuration are set after session/new, in order.
	Configuration []ConfigSetting
	// NoSessionMCP sends session/new without MCP servers, for agents that
	// accept but do not connect them; the profile attaches the granted
	// servers (and the bridge, see LaunchContext.Bridge) itself.
	NoSessionMCP bool
	// TransformText rewrites each turn's assembled text (for example to
	// drop an agent's startup banner); it also receives the _meta of the
	// session/new response. Messages are then omitted, because their
	// boundaries no longer map onto the text.
	TransformText func(text string, sessionMeta map[string]any) string
	// DropMessageChunk, when set, leaves out of the turn's text (and its
	// messages) every agent_message_chunk whose text it reports true for:
	// for notices an agent sends as chunks of their own, which the
	// assembled text could no longer tell apart from the answer. The
	// update is still traced.
	DropMessageChunk func(text string) bool
	// SessionMeta is the _meta of session/new, for agents that take
	// options there (Claude Code's adapter takes its system prompt as
	// _meta.systemPrompt); nil sends none.
	SessionMeta map[string]any
	// SystemHandled reports that the launch already delivers the system
	// text (for example as agent configuration); otherwise it becomes a
	// first-turn <SYSTEM> prelude.
	SystemHandled bool
	// Secrets are values AML passes to the agent (credentials, in Env or
	// elsewhere) that must not reach errors or traces when the agent
	// prints them; the values of the configured env= are always redacted.
	Secrets []string
}

// LaunchFile is one file a profile writes into the state directory.
type LaunchFile struct {
	// Path is a normalized relative path below the state directory.
	Path    string
	Content []byte
	// Executable makes the file mode 0700 instead of 0600.
	Executable bool
}

// prepareLaunch resolves the session's launch: the configured command,
// or the Profile's plan with its state directory and files.
func (s *session) prepareLaunch(ctx context.Context, cwd string) error {
	cfg := s.p.cfg
	s.launch = &Launch{Command: cfg.Command, Args: cfg.Args, Env: cfg.Env, AuthMethodID: cfg.AuthMethodID, InitialPromptPrefix: cfg.InitialPromptPrefix}
	if cfg.Profile == nil {
		return nil
	}
	if err := s.makeState(ctx); err != nil {
		return err
	}
	lc := LaunchContext{Cwd: cwd, StateDir: s.stateDir, Request: s.req, Local: s.sandbox == nil, Route: s.route}
	if b := s.bridge; b != nil {
		lc.Bridge = &BridgeInfo{Name: b.name, URL: b.url, Authorization: b.header()}
		if s.guest() != nil {
			d, err := s.bridgeDescriptor(false)
			if err != nil {
				return err
			}
			if st := d.Stdio; st != nil {
				lc.Bridge.Relay = append([]string{st.Command}, st.Args...)
				lc.Bridge.RelayEnv = map[string]string{}
				for _, v := range st.Env {
					lc.Bridge.RelayEnv[v.Name] = v.Value
				}
			}
		}
	}
	l, err := cfg.Profile(ctx, lc)
	if err != nil {
		return fmt.Errorf("provider %q: %w", cfg.Name, err)
	}
	if l == nil {
		return fmt.Errorf("provider %q: the profile produced no launch", cfg.Name)
	}
	if s.modelRelay != nil {
		s.modelRelay.wrap(l)
	}
	if err := checkLaunch(l.Command, l.Args, l.Env); err != nil {
		return fmt.Errorf("provider %q: the profile's launch: %w", cfg.Name, err)
	}
	s.launch = l
	for _, f := range l.Files {
		if err := s.writeStateFile(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

func randomName() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// makeState creates the invocation-private state directory: a host temp
// directory, or /tmp/aml-acp-<random> inside the sandbox.
func (s *session) makeState(ctx context.Context) error {
	if s.sandbox == nil {
		dir, err := scratch.MkdirTemp("aml-acp-")
		if err != nil {
			return fmt.Errorf("creating the agent's state directory: %w", err)
		}
		s.stateDir = dir
		return nil
	}
	name, err := randomName()
	if err != nil {
		return err
	}
	// The owner marker beside the directory lets a later aml process of
	// this machine remove what a killed one left (a local sandbox's /tmp
	// is the host's).
	dir := "/tmp/aml-acp-" + name
	marker, err := scratch.Marker()
	if err != nil {
		return err
	}
	script := `umask 077 && cat > "$1` + scratch.MarkerSuffix + `" && mkdir -p -- "$1"`
	res, err := s.sandbox.Runtime.Exec(ctx, "sh", []string{"-c", script, "sh", dir}, eval.ExecOptions{Stdin: bytes.NewReader(marker)})
	if err != nil {
		return fmt.Errorf("creating the agent's state directory in the sandbox: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("creating the agent's state directory in the sandbox: mkdir exited with code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	s.stateDir = dir
	return nil
}

// writeStateFile writes one launch file below the state directory.
func (s *session) writeStateFile(ctx context.Context, f LaunchFile) error {
	p := f.Path
	if p == "" || strings.TrimSpace(p) != p || strings.IndexByte(p, 0) >= 0 || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("launch file path %q must be a normalized relative path below the state directory", p)
	}
	mode := os.FileMode(0o600)
	if f.Executable {
		mode = 0o700
	}
	if s.sandbox == nil {
		full := filepath.Join(s.stateDir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return fmt.Errorf("writing launch file %s: %w", p, err)
		}
		if err := os.WriteFile(full, f.Content, mode); err != nil {
			return fmt.Errorf("writing launch file %s: %w", p, err)
		}
		return nil
	}
	full := s.stateDir + "/" + p
	script := `mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"`
	res, err := s.sandbox.Runtime.Exec(ctx, "sh", []string{"-c", script, "sh", full, fmt.Sprintf("%o", mode)}, eval.ExecOptions{Stdin: strings.NewReader(string(f.Content))})
	if err != nil {
		return fmt.Errorf("writing launch file %s in the sandbox: %w", p, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("writing launch file %s in the sandbox: exit code %d: %s", p, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// removeState removes the state directory; repeat-safe.
func (s *session) removeState(ctx context.Context) error {
	dir := s.stateDir
	if dir == "" {
		return nil
	}
	s.stateDir = ""
	if s.sandbox == nil {
		if err := scratch.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing the agent's state directory: %w", err)
		}
		return nil
	}
	res, err := s.sandbox.Runtime.Exec(ctx, "rm", []string{"-rf", "--", dir, dir + scratch.MarkerSuffix}, eval.ExecOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("rm exited with code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return fmt.Errorf("removing the agent's state directory in the sandbox: %w", err)
	}
	return nil
}

// configure applies the launch's configuration settings to the session.
func (s *session) configure(ctx context.Context, advertised []acpsdk.SessionConfigOption) error {
	for _, want := range s.launch.Configuration {
		label := want.ID
		if label == "" {
			label = "category " + want.Category
		}
		var req acpsdk.SetSessionConfigOptionRequest
		found := false
		for _, o := range advertised {
			switch {
			case o.Select != nil && matches(string(o.Select.Id), o.Select.Category, want):
				v, ok := want.Value.(string)
				if !ok {
					return fmt.Errorf("ACP configuration option %s takes a string value, got %T", label, want.Value)
				}
				offered := selectValues(o.Select.Options)
				if !slices.Contains(offered, v) {
					if len(offered) > 12 {
						offered = append(offered[:12], "…")
					}
					return fmt.Errorf("ACP agent %q does not offer %q for configuration option %s (%s); it offers: %s", s.launch.Command, v, label, o.Select.Name, strings.Join(offered, ", "))
				}
				req.ValueId = &acpsdk.SetSessionConfigOptionValueId{SessionId: s.id, ConfigId: o.Select.Id, Value: acpsdk.SessionConfigValueId(v)}
				found = true
			case o.Boolean != nil && matches(string(o.Boolean.Id), o.Boolean.Category, want):
				v, ok := want.Value.(bool)
				if !ok {
					return fmt.Errorf("ACP configuration option %s takes a boolean value, got %T", label, want.Value)
				}
				req.Boolean = &acpsdk.SetSessionConfigOptionBoolean{SessionId: s.id, ConfigId: o.Boolean.Id, Type: "boolean", Value: v}
				found = true
			}
			if found {
				break
			}
		}
		if !found {
			return fmt.Errorf("ACP agent %q does not advertise configuration option %s", s.launch.Command, label)
		}
		if err := s.handshake(ctx, "session/set_config_option", func(c context.Context) error {
			_, err := s.conn.SetSessionConfigOption(c, req)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func matches(id string, category *acpsdk.SessionConfigOptionCategory, want ConfigSetting) bool {
	if want.ID != "" {
		return id == want.ID
	}
	return category != nil && string(*category) == want.Category
}

func selectValues(opts acpsdk.SessionConfigSelectOptions) []string {
	var out []string
	if opts.Ungrouped != nil {
		for _, o := range *opts.Ungrouped {
			out = append(out, string(o.Value))
		}
	}
	if opts.Grouped != nil {
		for _, g := range *opts.Grouped {
			for _, o := range g.Options {
				out = append(out, string(o.Value))
			}
		}
	}
	return out
}

// CredentialHint returns hint when none of vars is set in env or, for a
// launch on the host (local), in the process environment, and "" when
// one is: the text a profile puts in Launch.CredentialHint.
func CredentialHint(env map[string]string, local bool, hint string, vars ...string) string {
	for _, v := range vars {
		if env[v] != "" || (local && os.Getenv(v) != "") {
			return ""
		}
	}
	return hint
}

// ModelKeyVars are the API key variables of the common model providers,
// which agents that reach several providers (OpenCode, Pi) read.
var ModelKeyVars = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY", "MISTRAL_API_KEY", "XAI_API_KEY", "DEEPSEEK_API_KEY"}
