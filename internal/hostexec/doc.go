// Package hostexec is AML's one host process runner: every host process
// AML starts, and every host file it serves below a directory, goes
// through it, so they all get the same process groups, output bounds,
// reaping and path rules.
//
// Open validates a host directory, a logical root and cwd below it and
// an access, and returns a Host; the Host's Runtime is an
// eval.SandboxRuntime (and eval.FileOpener) over that root. Its users:
//
//   - providers/sandbox/local, the local sandbox provider: each of its
//     leases is a Host over the workspace directory, and its setup runs
//     through Host.Run. Through it, the evaluator's Options.Host runs
//     script() outside any sandbox.
//   - providers/agent/acp, whose host launch spawns the agent in a Host
//     over the agent's working directory.
//   - providers/sandbox/docker and providers/sandbox/remote, which open a
//     Host over the workspace directory to validate the request's root
//     and cwd against it; the Docker sandbox also serves the files of its
//     mounted workspace from the host side through it.
//
// A Host is trusted host execution, not isolation: commands run with the
// privileges, environment, credentials and network of the application
// user (see the Trust section of providers/sandbox/local). The path and
// symbolic-link checks are hygiene for the Host's own file operations,
// not a boundary for processes. Its errors read "local sandbox ...", the
// name under which users meet it.
//
// # Access
//
// A host process cannot be held to read-only access, so under
// eval.ReadOnly the Runtime rejects Exec and Spawn with ErrReadOnlyExec,
// which wraps eval.ErrReadOnly. Reads (ReadFile, OpenFile, Stat) and file
// staging stay available under read-only access; WriteFile requires
// eval.ReadWrite. Host.Run, for the owner's trusted commands, is not
// subject to the access.
//
// # Processes
//
// Exec and Spawn run one executable with literal arguments (never through
// a shell) in its own process group, with the host environment plus the
// requested variables. Context cancellation, a timeout, captured output
// above the configured bound, and Release kill the whole process group
// with SIGKILL; when the group leader exits, any process it left behind
// in its group is killed as well. A process that moves itself to another
// group or session (setsid) leaves the group, but it still carries the
// command's mark (package internal/procscope) and is killed by it once
// the leader was reaped.
//
// Exec's stdin is ExecOptions.Stdin, or empty; its combined stdout and
// stderr are bounded by Options.MaxOutputBytes, and a non-zero exit is a
// result, not an error (a signal gives 128+signal). Spawn streams stdin,
// stdout and stderr through pipes the caller must drain; its output is not
// bounded. The context passed to Exec or Spawn bounds the process's
// lifetime, so a long-lived Spawn must be started under the context of
// the session that owns it, not under a short setup context.
//
// Release copies no files: writes already happened in the directory.
//
// # Files
//
// ReadFile, OpenFile, Stat and WriteFile operate on complete files below
// the runtime's root through os.Root, so no path or symbolic link reaches
// outside it. WriteFile never writes through a symbolic link: it replaces
// the destination by renaming a temporary file written in the same
// directory. File stagings are private temporary directories outside the
// Host's directory, removed when released (or with the Host).
package hostexec
