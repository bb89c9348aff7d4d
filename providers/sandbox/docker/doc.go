// Package docker implements the "docker" sandbox provider: AML sandbox
// leases that are containers on a Docker engine, reached through the
// Engine API (github.com/docker/docker/client, with API version
// negotiation; no docker CLI).
//
// # Acquisition
//
// Every acquisition creates and starts one container from Options.Image
// (pulled first when the engine does not have it), named
// aml-<first 12 characters of the evaluation id>-<random suffix>, with
// docker-init as PID 1 (so orphans are reaped) and a shell loop that
// keeps the container alive. The workspace directory, the request's
// active workspace materialization or else Options.Workspace, is
// bind-mounted at /workspace, read-only for eval.ReadOnly leases, so the
// engine itself holds the lease to its access; the logical root and cwd
// are directories below /workspace. A private host directory for file
// stagings is mounted at /tmp/aml, and another one read-only at
// /opt/aml/run, where the host serves the tool bridge's unix socket (the
// container can connect to it but neither replace nor plant anything
// beside it). The host reaches what is below /tmp/aml, which the
// container can write, only through a handle it opened before the
// container existed: it never follows a link planted there. A command's
// process id (to kill its group) comes in the exec's own stream, never
// from a file the container could replace. The container has Options.Network
// ("none" unless set), Options.User and Options.Env, and the labels
// Options.Labels plus aml.run (the evaluation id), aml.lease (the lease
// id) and aml.owner (this process). Options.Setup, when set, runs with
// "sh -lc" in the cwd; a non-zero exit, or running past
// Options.SetupTimeout, fails the acquisition. Every call to the engine
// is bounded by Options.EngineTimeout (see EngineTimeoutError).
//
// A failed acquisition, a release, a cancelled acquisition: every path
// removes the container (forcibly, with its anonymous volumes) and the
// host staging and socket directories, exactly once.
//
// # Commands
//
// Exec and Spawn run one executable with literal arguments through
// "docker exec", wrapped by /bin/sh so that its process id is known: the
// image must have /bin/sh. The command runs in its own process group (a
// docker exec is its session leader); cancellation, a timeout, output
// above Options.MaxOutputBytes and release kill the whole group inside the
// container. Its environment is the image's, then Options.Env, then the
// command's own variables.
//
// # Files
//
// ReadFile, Stat and WriteFile work on the bind-mounted directory from the
// host, through the confinement of AML's host runner (internal/hostexec,
// as in the local sandbox; os.Root): no path and no symbolic link planted
// by a command in the container reaches outside the root, and WriteFile
// replaces a file by an atomic rename. File stagings are host directories
// below the /tmp/aml mount, writable whatever the lease's access.
package docker
