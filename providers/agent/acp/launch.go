package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aml-go/aml/eval"
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
	// ModelHandled reports that the launch already applies the request's
	// model; otherwise a request with a model fails closed.
	ModelHandled bool
	// StructuredInstruction replaces the default instruction appended to
	// a schema-bearing final turn (and repeated by the repair prompt), for
	// agents that name the submission tool differently.
	StructuredInstruction string
	// SystemHandled reports that the launch already delivers the system
	// text (for example as agent configuration); otherwise it becomes a
	// first-turn <SYSTEM> prelude.
	SystemHandled bool
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
	l, err := cfg.Profile(ctx, LaunchContext{Cwd: cwd, StateDir: s.stateDir, Request: s.req, Local: s.sandbox == nil})
	if err != nil {
		return fmt.Errorf("provider %q: %w", cfg.Name, err)
	}
	if l == nil || strings.TrimSpace(l.Command) == "" || strings.IndexByte(l.Command, 0) >= 0 {
		return fmt.Errorf("provider %q: the profile produced no valid command", cfg.Name)
	}
	for _, a := range l.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("provider %q: a launch argument contains a NUL byte", cfg.Name)
		}
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
		dir, err := os.MkdirTemp("", "aml-acp-")
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
	dir := "/tmp/aml-acp-" + name
	res, err := s.sandbox.Runtime.Exec(ctx, "mkdir", []string{"-p", "--", dir}, eval.ExecOptions{})
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
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing the agent's state directory: %w", err)
		}
		return nil
	}
	res, err := s.sandbox.Runtime.Exec(ctx, "rm", []string{"-rf", "--", dir}, eval.ExecOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("rm exited with code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return fmt.Errorf("removing the agent's state directory in the sandbox: %w", err)
	}
	return nil
}
