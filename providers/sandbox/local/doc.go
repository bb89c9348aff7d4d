// Package local implements the "local" sandbox provider: AML sandbox
// leases whose commands run as ordinary host processes in a materialized
// workspace directory.
//
// It is also AML's one host runner: the evaluator's Options.Host (for
// script() outside any sandbox) and the ACP engine's host launch acquire
// a read-write lease of this provider rooted at their working directory,
// so every host process AML starts gets the same process groups, output
// bounds, reaping and path rules.
//
// # Trust
//
// The local sandbox is trusted host execution, not isolation. Commands run
// with the privileges, environment, credentials and network of the
// application user. Nothing confines what a command (or anything it
// starts) does to files outside the workspace, to the network, or to CPU,
// memory and syscalls. The logical-path and symbolic-link checks described
// below are path hygiene for the runtime's own file operations; they are
// not a security boundary for processes. Use the local sandbox only for
// commands the application already trusts; run untrusted or
// model-generated code in a separately hardened environment.
//
// # Acquisition
//
// A lease needs a workspace directory: the request's active workspace
// materialization wins, otherwise Options.Workspace is used. The
// workspace directory is the boundary; the request's logical root must
// resolve (following symbolic links) to an existing directory inside it,
// and the logical cwd to an existing directory inside the root. Logical
// paths are relative and slash-separated; absolute paths, backslashes and
// ".." segments are rejected. Options.Setup, when configured, runs through
// "sh -lc" in the cwd on every acquisition; a non-zero exit fails the
// acquisition and releases everything it created.
//
// # Access
//
// A host process cannot be held to read-only access, so under
// eval.ReadOnly the runtime rejects Exec and Spawn (and a configured
// Setup) with an error wrapping eval.ErrReadOnly. Reads (ReadFile, Stat)
// and file staging stay available under read-only access; WriteFile
// requires eval.ReadWrite.
//
// # Processes
//
// Exec and Spawn run one executable with literal arguments (never through
// a shell) in its own process group, with the host environment plus the
// requested variables. Context cancellation, a timeout, captured output
// above the configured bound, and lease release kill the whole process
// group with SIGKILL; when the group leader exits, any process it left
// behind in its group is killed as well. A process that moves itself to
// another group or session (setsid) escapes this tracking.
//
// Exec's stdin is ExecOptions.Stdin, or empty; its combined stdout and
// stderr are bounded by Options.MaxOutputBytes, and a non-zero exit is a
// result, not an error (a signal gives 128+signal). Spawn streams stdin,
// stdout and stderr through pipes the caller must drain; its output is not
// bounded. The context passed to Exec or Spawn bounds the process's
// lifetime, so a long-lived Spawn must be started under the context of
// the session that owns it, not under a short setup context.
//
// Release copies no files: writes already happened in the workspace
// directory.
//
// # Files
//
// ReadFile, Stat and WriteFile operate on complete files below the
// runtime's root through os.Root, so no path or symbolic link reaches
// outside it. WriteFile never writes through a symbolic link: it replaces
// the destination by renaming a temporary file written in the same
// directory. File stagings are private temporary directories outside the
// workspace, removed when released.
package local
