package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds replayguard once for the tests that need a child process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "replayguard")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// crashFeed is a capture with failover bursts, late messages, conflicts and
// an epoch restart, big enough that an ingest takes a while.
func crashFeed(t *testing.T, rng *rand.Rand, n int) string {
	t.Helper()
	var b strings.Builder
	var sent []string
	seq := map[int]int{}
	boot := map[int]int{}
	for i := 0; i < n; i++ {
		src := rng.IntN(20)
		if boot[src] == 0 || rng.IntN(5000) == 0 {
			boot[src]++
			seq[src] = 0
		}
		seq[src]++
		line := fmt.Sprintf(`{"topic":"incidents/fd/e%d","payload":{"agency":"fd","source_id":"e%d","boot_id":%d,"sequence":%d,"incident_id":"I%d","casualty_delta":%d,"unit_id":"U%d","unit_status":"s%d"}}`,
			src, src, boot[src], seq[src], src%7, 1+rng.IntN(3), src, seq[src])
		sent = append(sent, line)
		b.WriteString(line + "\n")
		if rng.IntN(200) == 0 { // a failover burst
			from := max(0, len(sent)-1-rng.IntN(300))
			for _, l := range sent[from:] {
				b.WriteString(l + "\n")
			}
		}
		if rng.IntN(500) == 0 {
			fmt.Fprintf(&b, `{"topic":"plant/m%d/energy","payload":{"msgId":"m-%d","kwh":0.125}}`+"\n", src, i)
		}
	}
	path := filepath.Join(t.TempDir(), "feed.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKillDuringIngestThenIngestAgain kills `replayguard ingest` with
// SIGKILL at random moments, then ingests the same capture again: the state
// must equal one clean run's, and the audit chain must verify.
func TestKillDuringIngestThenIngestAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and ingests several times")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	bin := buildBinary(t)
	feed := crashFeed(t, rng, 60000)

	clean := testConfig(t, "")
	start := time.Now()
	runBin(t, bin, "ingest", "-c", clean, "--batch", "200", feed)
	cleanTook := time.Since(start)
	want := runBin(t, bin, "state", "--json", "-c", clean)
	t.Logf("clean ingest took %s", cleanTook)

	crashed := testConfig(t, "")
	kills := 0
	for round := 0; round < 5; round++ {
		cmd := exec.Command(bin, "ingest", "-c", crashed, "--batch", "200", feed)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.Int64N(int64(cleanTook)))
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if err != nil {
			kills++
		}
		t.Logf("round %d: killed after %s (%v)", round, delay, err)
	}
	if kills == 0 {
		t.Fatal("no ingest was killed mid-way: the test proved nothing")
	}
	runBin(t, bin, "ingest", "-c", crashed, "--batch", "200", feed)
	if got := runBin(t, bin, "state", "--json", "-c", crashed); got != want {
		t.Fatalf("state after %d kills differs from a clean run's\n got: %.500s\nwant: %.500s", kills, got, want)
	}
	runBin(t, bin, "audit", "verify", "-c", crashed)
}

func runBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("replayguard %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}
