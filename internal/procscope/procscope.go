// Package procscope marks the processes AML starts so that all their
// descendants can be found again, also the ones that left their process
// group (setsid) and the ones left behind by an aml process that was
// killed: every process AML starts gets two environment variables,
// inherited by everything it starts in turn, and on Linux the processes
// that carry a value are found through /proc.
//
//	AML_OWNER=<marker of this aml process>   (one value per process)
//	AML_PROCESS=<id of one started command>  (one value per command)
//
// A descendant that clears its environment escapes; that is the limit of
// this mechanism. Every function is safe for concurrent use.
package procscope

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/google/uuid"
)

// The environment variables that mark processes.
const (
	OwnerVar   = "AML_OWNER"
	ProcessVar = "AML_PROCESS"
)

var marker = sync.OnceValue(func() string { return "aml-" + uuid.NewString() })

// Marker is this process's owner marker: the value of OwnerVar in every
// process it starts.
func Marker() string { return marker() }

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
