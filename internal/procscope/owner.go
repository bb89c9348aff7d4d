package procscope

import (
	"os"
	"strconv"
	"strings"
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

// MarkerGone reports whether marker (a Marker value, "aml-<pid>-<machine
// tag>-<uuid>") names an aml process of this machine that no longer
// exists. A marker of another machine, of this process, or one that does
// not parse is never gone: what it marks is left alone.
func MarkerGone(marker string) bool {
	parts := strings.SplitN(strings.TrimPrefix(marker, "aml-"), "-", 3)
	if !strings.HasPrefix(marker, "aml-") || len(parts) != 3 {
		return false
	}
	tag := machineTag()
	if tag == "0" || parts[1] != tag {
		return false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !Alive(pid)
}
