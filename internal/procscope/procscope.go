// Package procscope marks the processes AML starts so that all their
// descendants can be found again, also the ones that left their process
// group (setsid) and the ones left behind by an aml process that was
// killed: every process AML starts gets two environment variables,
// inherited by everything it starts in turn, and on Linux the processes
// that carry a value are found through /proc.
//
//	AML_OWNER=aml-<pid>-<machine tag>-<uuid>  (one value per aml process)
//	AML_PROCESS=<id of one started command>   (one value per command)
//
// The owner's pid in the marker lets a later aml process find what a
// killed one left running (Orphans, used by aml workspace prune).
//
// A descendant that clears its environment escapes; that is the limit of
// this mechanism. Every function is safe for concurrent use.
package procscope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// The environment variables that mark processes.
const (
	OwnerVar   = "AML_OWNER"
	ProcessVar = "AML_PROCESS"
)

var marker = sync.OnceValue(func() string {
	return fmt.Sprintf("aml-%d-%s-%s", os.Getpid(), machineTag(), uuid.NewString())
})

// MachineTag is a short digest of MachineID ("0" when unknown): a name
// that records a pid next to it (an owner marker, a temporary file)
// names that pid only for processes with the same tag.
func MachineTag() string { return machineTag() }

func machineTag() string {
	m := MachineID()
	if m == "" {
		return "0"
	}
	sum := sha256.Sum256([]byte(m))
	return hex.EncodeToString(sum[:4])
}

// Marker is this process's owner marker, the value of OwnerVar in every
// process it starts: "aml-<pid>-<machine tag>-<uuid>", so that the
// processes an aml process that no longer exists left behind can be told
// (Orphans).
func Marker() string { return marker() }

// Orphan is a live process that an aml process that no longer exists
// started (directly or not).
type Orphan struct {
	// PID is the orphan's pid.
	PID int `json:"pid"`
	// Owner is the pid of the aml process that started it.
	Owner int `json:"owner"`
}

// Orphans returns the live processes of this machine whose OwnerVar
// names an aml process of this machine (same boot and pid namespace)
// that no longer exists. Off Linux it returns none.
func Orphans() []Orphan {
	tag := machineTag()
	if tag == "0" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	want := []byte("\x00" + OwnerVar + "=aml-")
	var out []Orphan
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		env = append([]byte{0}, env...)
		i := bytes.Index(env, want)
		if i < 0 {
			continue
		}
		val := env[i+len(want):]
		if j := bytes.IndexByte(val, 0); j >= 0 {
			val = val[:j]
		}
		parts := strings.SplitN(string(val), "-", 3)
		if len(parts) != 3 || parts[1] != tag {
			continue
		}
		owner, err := strconv.Atoi(parts[0])
		if err != nil || owner <= 0 || owner == self || Alive(owner) || zombie(pid) {
			continue
		}
		out = append(out, Orphan{PID: pid, Owner: owner})
	}
	return out
}

// KillOrphans sends SIGKILL to every process Orphans returns and returns
// them.
func KillOrphans() []Orphan {
	o := Orphans()
	for _, p := range o {
		kill(p.PID)
	}
	return o
}

// Env returns the marker variables for one command started by this
// process, identified by id.
func Env(id string) []string {
	return []string{OwnerVar + "=" + Marker(), ProcessVar + "=" + id}
}

// Supported reports whether marked processes can be found on this host.
func Supported() bool {
	_, err := os.Stat("/proc/self/environ")
	return err == nil
}

// Find returns the live processes (not zombies) whose environment holds
// name=value, other than this process.
func Find(name, value string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(name + "=" + value + "\x00")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		if zombie(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// Kill sends SIGKILL to every live process whose environment holds
// name=value and returns their pids. A process that exited meanwhile is
// not an error.
func Kill(name, value string) []int {
	pids := Find(name, value)
	for _, pid := range pids {
		kill(pid)
	}
	return pids
}

// zombie reports a process that has exited but was not reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
