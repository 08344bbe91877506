package main

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunRefusesAnAddressInUseBeforeItServes: with http.listen taken by
// another process, run stops with exit 1 naming the address, having said
// nothing of serving and consumed nothing (it logged "serving the API and
// dashboard", and started its consumer, before the listener failed).
func TestRunRefusesAnAddressInUseBeforeItServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	bin := buildBinary(t)
	cfg, listen, _ := daemonConfig(t, "")
	taken, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "run", "-c", cfg).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("run with %s in use: %v, want exit 1\n%s", listen, err, out)
	}
	log := string(out)
	if !strings.Contains(log, "address already in use") || !strings.Contains(log, listen) {
		t.Fatalf("run does not say the address is in use:\n%s", log)
	}
	for _, started := range []string{"serving the API and dashboard", "connected"} {
		if strings.Contains(log, started) {
			t.Fatalf("run logged %q before it found the address in use:\n%s", started, log)
		}
	}
}
