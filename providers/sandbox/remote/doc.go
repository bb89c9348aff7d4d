// Package remote is the core of the sandbox providers whose sandboxes are
// remote machines reached through a service's API (Daytona, Modal): a
// disposable sandbox per acquisition, the workspace transferred in by tar
// and, on release of a read-write lease, the remote tree mirrored back
// into the source. A provider supplies a Service (its client); this
// package owns the lifecycle, paths, processes, files and transfers.
package remote
