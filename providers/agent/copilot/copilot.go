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
	"os"
	"path"
	"slices"
	"strings"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Copilot profile: the shared acp.Base (Name ""
// means "copilot", Command "" means "copilot", Model "" means "auto",
// Args come before the AML-owned flags, Env holds the tokens) and what is
// Copilot's own.
type Options struct {
	acp.Base
	// ReasoningEffort is passed as --reasoning-effort.
	ReasoningEffort string
}

// tokenVars are the token variables in priority order.
var tokenVars = []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"}

// New returns the Copilot agent provider.
func New(o Options) (*acp.Provider, error) {
	profile := func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
		req := lc.Request
		model := b.ModelFor(req)
		flags := append(slices.Clone(b.Args), "--acp", "--no-auto-update", "--log-dir="+path.Join(lc.StateDir, "logs"),
			"--no-custom-instructions", "--disable-builtin-mcps", "--no-ask-user")
		if v := tokenVar(b.Env, lc.Local); v != "" {
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
		e := b.LaunchEnv()
		e["COPILOT_HOME"] = lc.StateDir
		e["HOME"] = lc.StateDir
		l := &acp.Launch{Command: b.Command, Args: flags, Env: e, ModelHandled: true}
		server := req.ToolServerName()
		if len(req.Tools) > 0 {
			var sb strings.Builder
			sb.WriteString("The AML tools are available under these names:")
			for _, t := range req.Tools {
				fmt.Fprintf(&sb, "\n- %s: %s-%s", t.Name, server, t.Name)
			}
			l.InitialPromptPrefix = sb.String()
		}
		name := server + "-" + acp.SubmitToolName
		l.StructuredInstruction = "Call " + name + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."
		return l, nil
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{Factory: "copilot_agent", Name: "copilot", Command: "copilot", Model: "auto",
		Strings: map[string]string{"reasoning_effort": o.ReasoningEffort}, Launch: profile})
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
