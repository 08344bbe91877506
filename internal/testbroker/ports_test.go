package testbroker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestFreePortReservesPortsBelowTheEphemeralRange: each port FreePort
// gives lies below the kernel's ephemeral ports, differs from the others,
// and is reserved until the test's end.
func TestFreePortReservesPortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p < portsLow || p >= ephemeralLow() || seen[p] {
			t.Fatalf("FreePort = %d: want a port in [%d, %d) not given before", p, portsLow, ephemeralLow())
		}
		seen[p] = true
		if _, err := os.Stat(filepath.Join(portsDir(), strconv.Itoa(p))); err != nil {
			t.Fatalf("port %d is not reserved: %v", p, err)
		}
	}
}

// TestAPortHeldByALiveProcessIsNotTaken, and one whose holder died is.
func TestAPortHeldByALiveProcessIsNotTaken(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t) // reserved by this process: taken by no other test
	for _, c := range []struct {
		holder int
		taken  bool
	}{{os.Getppid(), false}, {dead.Process.Pid, true}} {
		path := filepath.Join(portsDir(), strconv.Itoa(port))
		if err := os.WriteFile(path, []byte(strconv.Itoa(c.holder)), 0o666); err != nil {
			t.Fatal(err)
		}
		if got := reservePort(t, port); got != c.taken {
			t.Fatalf("reservePort of a port held by process %d = %v, want %v", c.holder, got, c.taken)
		}
	}
}
