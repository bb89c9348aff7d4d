package temporal

import (
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// Activity names of scope sessions.
const (
	// AcquireActivity acquires a workspace, a sandbox or the host on a
	// session's worker.
	AcquireActivity = "aml.acquire"
	// ExecActivity runs one command of script() in a held lease.
	ExecActivity = "aml.exec"
	// FileActivity reads, describes or writes one file of a held lease,
	// or works a file staging.
	FileActivity = "aml.file"
	// SaveActivity saves a held workspace by its policy.
	SaveActivity = "aml.save"
	// ReleaseActivity releases a held lease.
	ReleaseActivity = "aml.release"
)

// The kinds of a held lease.
const (
	kindWorkspace = "workspace"
	kindSandbox   = "sandbox"
	kindHost      = "host"
)

// AcquireCall is the input of AcquireActivity.
type AcquireCall struct {
	// Kind is "workspace", "sandbox" or "host".
	Kind string `json:"kind"`
	// Provider is the provider's name; ProviderIndex, when not negative,
	// its ordinal among the providers of its kind that Bundle makes while
	// it loads.
	Provider      string  `json:"provider,omitempty"`
	ProviderIndex int     `json:"providerIndex"`
	Bundle        *Bundle `json:"bundle,omitempty"`
	RunID         string  `json:"runId"`
	// Workspace is the request of a workspace.
	Workspace *eval.WorkspaceAcquireRequest `json:"workspace,omitempty"`
	// Sandbox is the request of a sandbox; WorkspaceKey, when set, is
	// the held workspace whose directory it materializes (the
	// request's Workspace.Directory is replaced by that lease's).
	Sandbox      *eval.SandboxAcquireRequest `json:"sandbox,omitempty"`
	WorkspaceKey string                      `json:"workspaceKey,omitempty"`
	// Restore, for a workspace acquired again after its worker died, is
	// the checkpoint its files are restored from.
	Restore string `json:"restore,omitempty"`
	// Source is the authored position of the scope.
	Source string `json:"source,omitempty"`
	// Cwd is the run's RunInput.Cwd: the providers' relative paths and
	// the host's directory.
	Cwd string `json:"cwd,omitempty"`
	// Factory, for a provider that a component body made, is the call
	// that made it (see AgentCall.Factory).
	Factory *starlib.FactoryCall `json:"factory,omitempty"`
}

// AcquireResult is what AcquireActivity returns: the held lease's key on
// its worker, and what the lease reports.
type AcquireResult struct {
	Key       string      `json:"key"`
	LeaseID   string      `json:"leaseId"`
	Directory string      `json:"directory,omitempty"`
	Access    eval.Access `json:"access,omitempty"`
	Root      string      `json:"root,omitempty"`
	Cwd       string      `json:"cwd,omitempty"`
	// Stateless reports that the sandbox keeps no files of its own
	// (eval.StatelessSandbox), so it can be acquired again elsewhere.
	Stateless bool `json:"stateless,omitempty"`
}

// ExecCall is the input of ExecActivity.
type ExecCall struct {
	Key     string            `json:"key"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Stdin   []byte            `json:"stdin,omitempty"`
	Timeout time.Duration     `json:"timeout,omitempty"`
	// Checkpoint asks the worker to checkpoint the lease's workspace
	// after the command.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// ExecReply is what ExecActivity returns.
type ExecReply struct {
	Result     eval.ExecResult `json:"result"`
	Checkpoint string          `json:"checkpoint,omitempty"`
}

// File operations of FileActivity.
const (
	fileRead          = "read"
	fileStat          = "stat"
	fileWrite         = "write"
	fileStagingCreate = "staging.create"
	fileStagingWrite  = "staging.write"
	fileStagingFree   = "staging.release"
	// fileCheckpoint checkpoints the workspace Key names.
	fileCheckpoint = "checkpoint"
)

// FileCall is the input of FileActivity.
type FileCall struct {
	Key  string `json:"key"`
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	Data []byte `json:"data,omitempty"`
	// Staging names a staging of the lease (staging.write and
	// staging.release).
	Staging    string `json:"staging,omitempty"`
	Checkpoint bool   `json:"checkpoint,omitempty"`
	// Offset and Limit make a read return at most Limit bytes of the file
	// from Offset (fewer at its end); Limit 0 reads the whole file, up to
	// the read bound.
	Offset int64 `json:"offset,omitempty"`
	Limit  int64 `json:"limit,omitempty"`
}

// FileReply is what FileActivity returns.
type FileReply struct {
	Data       []byte        `json:"data,omitempty"`
	Info       eval.FileInfo `json:"info"`
	Staging    string        `json:"staging,omitempty"`
	Root       string        `json:"root,omitempty"`
	Checkpoint string        `json:"checkpoint,omitempty"`
}

// SaveCall is the input of SaveActivity.
type SaveCall struct {
	Key     string                    `json:"key"`
	Request eval.WorkspaceSaveRequest `json:"request"`
}

// ReleaseCall is the input of ReleaseActivity.
type ReleaseCall struct {
	Key string `json:"key"`
}

// scopeSessionFailure is the error type of a scope session's own failure (a provider's
// error): it is not retried.
const scopeSessionFailure = "aml.place.failure"
