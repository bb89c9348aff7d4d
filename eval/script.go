package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// shellArgs are the interpreter arguments that run source with a shell.
var shellArgs = map[string]string{"sh": "-c", "bash": "-c", "node": "-e"}

// runScript runs a script() node and returns its standard output.
// In a journaled evaluation (path non-nil) a recorded output is served
// instead of running the command, and a live output is recorded.
func (d *domain) runScript(ctx context.Context, n *Script, source []byte, res resScope, parentSpan string, path *effectPath) (string, error) {
	command, args := n.Command, n.Args
	if n.Shell != "" {
		flag, ok := shellArgs[n.Shell]
		if !ok {
			return "", newError(n.Position, fmt.Sprintf("script(shell=%q) is not supported; use \"sh\", \"bash\" or \"node\"", n.Shell))
		}
		if isBlank(string(source)) {
			return "", newError(n.Position, "script(shell=...) needs non-empty source: pass the script text as its children")
		}
		command, args = n.Shell, []string{flag, string(source)}
	}
	if command == "" {
		return "", newError(n.Position, "script() needs command= (literal argv) or shell= with source children")
	}
	timeout := time.Duration(n.TimeoutMS) * time.Millisecond
	env := "host"
	if res.sb != nil {
		env = "sandbox"
	}
	var (
		rec, entry *Effect
		err        error
	)
	if d.journal != nil {
		var f fingerprint
		f.add("command", commandLine(command, args))
		if n.Cwd != "" {
			f.add("cwd", n.Cwd)
		}
		f.add("environment", env)
		at := path.next("script")
		entry = &Effect{ID: at.id, Order: at.order, Kind: "script", Pos: d.journal.relPos(n.Position), Label: "script()", Request: f.String()}
		if rec, err = d.replay(at, entry.Kind, n.Position, entry.Label, entry.Request); err != nil {
			return "", err
		}
	}
	var content attrs
	if d.trace.captures() {
		content = attrs{"command", commandLine(command, args)}
	}
	a := attrs{"environment", env}
	if rec != nil {
		a = append(a, "replayed", true)
	}
	// The command is content: the span has a neutral name and carries the
	// command only for capturing sinks.
	sp := d.trace.startSpan(parentSpan, "script", "Script", n.Position, a, content)
	if rec != nil {
		var out scriptResult
		if err := json.Unmarshal(rec.Result, &out); err != nil {
			err = &EvaluationError{Msg: "the journal's record of script() cannot be read", Pos: n.Position, Err: err}
			sp.end(err, nil, nil)
			return "", err
		}
		if err := d.replayedFiles(ctx, res.ws, rec); err != nil {
			sp.end(err, nil, nil)
			return "", err
		}
		sp.end(nil, attrs{"exitCode", int64(0)}, nil)
		return out.Stdout, nil
	}
	if entry != nil {
		if err := d.beforeLive(ctx, res.ws, n.Position, true); err != nil {
			sp.end(err, nil, nil)
			return "", err
		}
	}
	r, err := d.execScript(d.withEffect(ctx, entry), n, command, args, timeout, res)
	if err != nil {
		sp.end(err, nil, nil)
		return "", err
	}
	if r.ExitCode != 0 {
		msg := fmt.Sprintf("script() %s exited with code %d", command, r.ExitCode)
		if s := strings.TrimSpace(string(r.Stderr)); s != "" {
			msg += ": " + s
		}
		err := newError(n.Position, msg)
		sp.end(err, attrs{"exitCode", int64(r.ExitCode)}, nil)
		return "", err
	}
	if entry != nil {
		b, err := json.Marshal(scriptResult{Stdout: string(r.Stdout)})
		if err == nil {
			entry.Result = b
			err = d.recordIn(ctx, res.ws, entry, true)
		}
		if err != nil {
			sp.end(err, nil, nil)
			return "", err
		}
	}
	sp.end(nil, attrs{"exitCode", int64(0)}, nil)
	return string(r.Stdout), nil
}

// scriptResult is the recorded result of a script().
type scriptResult struct {
	Stdout string `json:"stdout"`
}

func (d *domain) execScript(ctx context.Context, n *Script, command string, args []string, timeout time.Duration, res resScope) (*ExecResult, error) {
	fail := func(err error) (*ExecResult, error) {
		if ctx.Err() != nil {
			return nil, &EvaluationError{Msg: "script() cancelled", Pos: n.Position, Err: context.Cause(ctx)}
		}
		if timeout > 0 && strings.Contains(err.Error(), "timed out") {
			return nil, &EvaluationError{Msg: fmt.Sprintf("script() %s timed out after timeout_ms=%d", command, n.TimeoutMS), Pos: n.Position, Err: err}
		}
		return nil, &EvaluationError{Msg: fmt.Sprintf("script() %s could not run", command), Pos: n.Position, Err: err}
	}
	cwd := ""
	if n.Cwd != "" {
		c, err := CheckLogicalPath(n.Cwd, true)
		if err != nil {
			return nil, newError(n.Position, "script(cwd=...): "+err.Error())
		}
		cwd = c
	}
	if v := res.sb; v != nil {
		if v.access == ReadOnly && v.rt.Access() != ReadOnly {
			// A running lease cannot be narrowed: a command in a read-only
			// view of a read-write lease could still write. Fail closed.
			return nil, newError(n.Position, "script() cannot run in a read-only sandbox() nested in a read-write one: the lease cannot enforce the narrower access; run it in the outer sandbox or make the outer sandbox read-only")
		}
		// Inside a sandbox the command never falls back to the host; cwd
		// resolves from the sandbox root, else the sandbox's cwd.
		if cwd == "" {
			cwd = v.cwd
		}
		unblock := d.workers.block()
		r, err := v.rt.Exec(ctx, command, args, ExecOptions{Cwd: v.logical(cwd), Timeout: timeout})
		unblock()
		if err == nil && r == nil {
			err = errors.New("sandbox returned no result")
		}
		if err != nil {
			return fail(err)
		}
		return r, nil
	}
	host, err := d.hostRuntime(ctx)
	if err != nil {
		return nil, &EvaluationError{Msg: "script() cannot run on the host", Pos: n.Position, Err: err}
	}
	unblock := d.workers.block()
	r, err := host.Exec(ctx, command, args, ExecOptions{Cwd: cwd, Timeout: timeout})
	unblock()
	if err == nil && r == nil {
		err = errors.New("the host runtime returned no result")
	}
	if err != nil {
		return fail(err)
	}
	return r, nil
}

// commandLine renders argv for traces, quoting arguments that would not
// read back as one word.
func commandLine(command string, args []string) string {
	var b strings.Builder
	b.WriteString(command)
	for _, a := range args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			b.WriteString(strconv.Quote(a))
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}
