package procscope

import (
	"fmt"
	"os/exec"
	"testing"
)

// TestMarkerGone: a marker of an exited process of this machine is gone;
// this process's, another machine's and malformed ones never are.
func TestMarkerGone(t *testing.T) {
	if MachineTag() == "0" {
		t.Skip("this machine has no machine id (/etc/machine-id or /proc/sys/kernel/random/boot_id): markers cannot be judged")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("aml-%d-%s-x", cmd.Process.Pid, MachineTag())
	for marker, want := range map[string]bool{
		dead:     true,
		Marker(): false,
		fmt.Sprintf("aml-%d-%s-x", cmd.Process.Pid, "ffffffff"): false,
		"aml-notapid-x-y": false,
		"nonsense":        false,
	} {
		if got := MarkerGone(marker); got != want {
			t.Errorf("MarkerGone(%q) = %v, want %v", marker, got, want)
		}
	}
}
