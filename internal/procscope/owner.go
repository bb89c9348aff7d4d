package procscope

import (
	"os"
	"sync"
)

// Process identifies a process across machines: its pid, its host and
// its kernel instance (Machine: the boot and pid namespace), so that a
// recorded pid is only judged by a process that sees the same pids. It is
// what AML records as the owner of a lock, a materialization or a
// scratch directory.
type Process struct {
	PID     int    `json:"pid"`
	Host    string `json:"host,omitempty"`
	Machine string `json:"machine,omitempty"`
}

// Self is this process.
func Self() Process { return Process{PID: os.Getpid(), Host: Hostname(), Machine: MachineID()} }

// Gone reports whether p is a process of this machine that no longer
// exists; a process of another machine (or one this machine cannot tell,
// such as any process off Linux) is never gone. A pid reused by another
// process keeps p alive: Gone errs on the side of keeping.
func (p Process) Gone() bool {
	m := MachineID()
	if m == "" || p.Machine != m || p.Host != Hostname() || p.PID <= 0 || p.PID == os.Getpid() {
		return false
	}
	return !Alive(p.PID)
}

var hostname = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// Hostname is this host's name ("" when unknown), read once.
func Hostname() string { return hostname() }
