// Package local implements the "local" sandbox provider: AML sandbox
// leases whose commands run as ordinary host processes in a materialized
// workspace directory.
//
// Each lease is a Host of internal/hostexec, AML's one host runner, over
// the workspace directory: the evaluator's Options.Host (for script()
// outside any sandbox) is usually this provider, and the ACP engine's
// host launch and the Docker and remote sandboxes' host side use the same
// runner directly, so every host process AML starts gets the same process
// groups, output bounds, reaping and path rules.
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
// # Processes and files
//
// Exec and Spawn run one executable with literal arguments (never through
// a shell) in its own process group, with the host environment plus the
// requested variables; Exec's combined output is bounded by
// Options.MaxOutputBytes. Context cancellation, a timeout, output above
// the bound and lease release kill the whole process group. ReadFile,
// Stat and WriteFile operate on complete files below the root, and no
// path or symbolic link reaches outside it; file stagings are private
// temporary directories outside the workspace, removed when released.
// The package documentation of internal/hostexec states these rules in
// full. Release copies no files: writes already happened in the
// workspace directory.
package local
