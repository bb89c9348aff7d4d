package procscope

import (
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
)

var machineID = sync.OnceValue(func() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
})

// MachineID identifies this kernel boot and pid namespace ("" when it
// cannot be told).
func MachineID() string { return machineID() }

// Alive reports whether pid exists (a zombie counts as alive until it is
// reaped).
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}
