// Package kubernetes is the client of a Kubernetes cluster running
// agent-sandbox (sigs.k8s.io/agent-sandbox, API agents.x-k8s.io/v1beta1)
// that the remote sandbox provider (providers/sandbox/remote) uses:
// Service implements remote.Service, and the pods it acquires implement
// remote.Machine. kubernetes_sandbox() (starlib/remotestar) binds it to
// Starlark.
//
// # Acquisition
//
// Create makes one object, named "aml-" and twelve random hex digits in
// the namespace, and waits for it to be Ready within Options.ReadyTimeout:
//
//   - With Options.Image (or none of the three: DefaultImage), a Sandbox
//     whose pod has one container, "sandbox", running the image with a
//     shell loop that keeps it alive until it is told to stop, the
//     resources asked for, the service account named (its token is
//     mounted only when one is named) and no service links.
//   - With Options.Template, a Sandbox whose blueprint is the named
//     SandboxTemplate's (extensions.agents.x-k8s.io), annotated with the
//     template's name. The template's containers must keep running.
//   - With Options.WarmPool, a SandboxClaim of the warm pool: the
//     controller hands it one of the pool's ready sandboxes, or makes one.
//
// Labels are limited to 63 characters of a small alphabet, so the
// provider's own (aml.run, aml.lease, aml.owner) are labels in a
// sanitized form, for selection, and annotations of the same names with
// the exact values, which List reports. A creation that fails, or whose
// context ends, deletes the object by its name (chosen before the
// request, so that an answer lost on the way still leaves nothing), and
// the pod with it.
//
// # Processes and files
//
// Every process is an exec (pods/exec, over WebSocket, else SPDY) of a
// small sh wrapper: it says its process id on stderr (internal/pidline),
// enters the directory, exports the environment and execs the literal
// argv. Kill runs a second exec that kills the process group. Upload and
// Download are execs of cat. A command whose pod is deleted or evicted
// while it runs fails with ErrPodGone and the pod's last state.
//
// # Errors
//
// Every API error is explained: no kubeconfig, an API server that does
// not answer within Options.ConnectTimeout, a verb that RBAC forbids
// (named with its resource, to grant), agent-sandbox not installed (with
// the command that installs it), an image that cannot be pulled, a pod
// that cannot be scheduled.
package kubernetes
