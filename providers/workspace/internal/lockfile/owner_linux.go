package lockfile

import (
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
)

var (
	machineOnce sync.Once
	machine     string
)

// machineID identifies this kernel boot and pid namespace, so that a
// recorded pid is only judged by a process that sees the same pids.
func machineID() string {
	machineOnce.Do(func() {
		boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err != nil {
			return
		}
		ns, err := os.Readlink("/proc/self/ns/pid")
		if err != nil {
			return
		}
		machine = strings.TrimSpace(string(boot)) + "/" + ns
	})
	return machine
}

// processAlive reports whether pid exists (a zombie counts as alive until
// it is reaped).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}
