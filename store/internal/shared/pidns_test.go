package shared

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDeadHereOtherPIDNamespace runs DeadHere in a new pid namespace (a
// container on this host with host networking, or any container given the
// same hostname) on the holder of this live process: its pid means nothing
// there, and must not be taken for a dead process's.
func TestDeadHereOtherPIDNamespace(t *testing.T) {
	if h := os.Getenv("REPLAYGUARD_TEST_DEADHERE"); h != "" {
		if DeadHere(h) {
			os.Stdout.WriteString("dead\n")
		} else {
			os.Stdout.WriteString("alive\n")
		}
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	me := NewHolder()
	cmd := exec.Command(unshare, "--pid", "--fork", os.Args[0], "-test.run=^TestDeadHereOtherPIDNamespace$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REPLAYGUARD_TEST_DEADHERE="+me)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("cannot make a pid namespace: %v: %s", err, out)
	}
	if strings.HasPrefix(string(out), "dead\n") {
		t.Fatalf("a process in another pid namespace on this host took the live holder %q for dead", me)
	}
	if !strings.HasPrefix(string(out), "alive\n") {
		t.Fatalf("unexpected output: %s", out)
	}
}
