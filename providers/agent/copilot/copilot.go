// Package copilot is the GitHub Copilot CLI agent profile over AML's ACP
// session engine: copilot_agent() in Starlark.
//
// Each session runs the Copilot CLI with Options.Args first and then the
// AML-owned flags, so that the arguments cannot override them: --acp,
// --no-auto-update, --log-dir=<state>/logs, --no-custom-instructions,
// --disable-builtin-mcps, --no-ask-user, --auth-token-env=<VAR> (when a
// token variable is found), --no-auto-login, --no-color, --no-remote,
// --no-remote-export, --model=<model>, --reasoning-effort=<effort> (when
// set), then the permission flags. COPILOT_HOME and HOME are the
// session's private state directory.
//
// The token variable is the first of COPILOT_GITHUB_TOKEN, GH_TOKEN and
// GITHUB_TOKEN set in Options.Env or, for a launch on the host, in the
// process environment; only its name is passed, never its value.
//
// Permissions: filesystem "read-only" denies the write tool and excludes
// edit and write; shell=False denies shell and excludes bash;
// network=False denies url and excludes web_fetch and web_search.
package copilot

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/option"
)

// Options configure the Copilot profile.
type Options struct {
	// Name is the provider name; "" means "copilot".
	Name string
	// Command is the Copilot CLI; "" means "copilot".
	Command string
	// Args come before the AML-owned flags.
	Args []string
	// Env adds environment variables (tokens); never traced.
	Env map[string]string
	// Model is the fallback model; "" means "auto".
	Model string
	// ReasoningEffort is passed as --reasoning-effort.
	ReasoningEffort string
	// WorkingDirectory is the session cwd outside a sandbox.
	WorkingDirectory string
}

// tokenVars are the token variables in priority order.
var tokenVars = []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"}

// New returns the Copilot agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.Name == "" {
		o.Name = "copilot"
	}
	if o.Command == "" {
		o.Command = "copilot"
	}
	if o.Model == "" {
		o.Model = "auto"
	}
	if err := option.Strings("copilot_agent", map[string]string{"name": o.Name, "command": o.Command, "model": o.Model,
		"reasoning_effort": o.ReasoningEffort, "working_directory": o.WorkingDirectory}); err != nil {
		return nil, err
	}
	env := maps.Clone(o.Env)
	args := slices.Clone(o.Args)
	profile := func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		req := lc.Request
		model := req.Model
		if model == "" {
			model = o.Model
		}
		flags := append(slices.Clone(args), "--acp", "--no-auto-update", "--log-dir="+path.Join(lc.StateDir, "logs"),
			"--no-custom-instructions", "--disable-builtin-mcps", "--no-ask-user")
		if v := tokenVar(env, lc.Local); v != "" {
			flags = append(flags, "--auth-token-env="+v)
		}
		flags = append(flags, "--no-auto-login", "--no-color", "--no-remote", "--no-remote-export", "--model="+model)
		if o.ReasoningEffort != "" {
			flags = append(flags, "--reasoning-effort="+o.ReasoningEffort)
		}
		var deny, exclude []string
		if req.Permissions.Filesystem != eval.ReadWrite {
			deny, exclude = append(deny, "write"), append(exclude, "edit", "write")
		}
		if !req.Permissions.Shell {
			deny, exclude = append(deny, "shell"), append(exclude, "bash")
		}
		if !req.Permissions.Network {
			deny, exclude = append(deny, "url"), append(exclude, "web_fetch", "web_search")
		}
		for _, d := range deny {
			flags = append(flags, "--deny-tool="+d)
		}
		if len(exclude) > 0 {
			flags = append(flags, "--excluded-tools")
			flags = append(flags, exclude...)
		}
		e := maps.Clone(env)
		if e == nil {
			e = map[string]string{}
		}
		e["COPILOT_HOME"] = lc.StateDir
		e["HOME"] = lc.StateDir
		l := &acp.Launch{Command: o.Command, Args: flags, Env: e, ModelHandled: true}
		server := req.ToolServer
		if server == "" {
			server = "aml"
		}
		if len(req.Tools) > 0 {
			var b strings.Builder
			b.WriteString("The AML tools are available under these names:")
			for _, t := range req.Tools {
				fmt.Fprintf(&b, "\n- %s: %s-%s", t.Name, server, t.Name)
			}
			l.InitialPromptPrefix = b.String()
		}
		name := server + "-" + acp.SubmitToolName
		l.StructuredInstruction = "Call " + name + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."
		return l, nil
	}
	return acp.New(acp.Config{Name: o.Name, Command: o.Command, WorkingDirectory: o.WorkingDirectory, Profile: profile})
}

// tokenVar names the token variable to pass: from env first, then (for a
// host launch) from the process environment.
func tokenVar(env map[string]string, local bool) string {
	for _, v := range tokenVars {
		if env[v] != "" {
			return v
		}
	}
	if local {
		for _, v := range tokenVars {
			if os.Getenv(v) != "" {
				return v
			}
		}
	}
	return ""
}
