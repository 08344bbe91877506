package failover

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// SoakEnv names the environment variable that, set to 1, makes the combined
// test ten times longer with more kills.
const SoakEnv = "REPLAYGUARD_SOAK"

// SeedEnv names the environment variable that fixes the seed of the random
// kill points, to repeat a run whose seed a log printed.
const SeedEnv = "REPLAYGUARD_SEED"

func TestMain(m *testing.M) { goleak.VerifyTestMain(removeBinaryAfter{m}) }

// removeBinaryAfter runs the tests, then removes the binary they built.
type removeBinaryAfter struct{ m *testing.M }

func (r removeBinaryAfter) Run() int {
	code := r.m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	return code
}

// binary is replayguard built once for every test that runs it as a child.
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// replayguardBinary builds cmd/replayguard (once per test process) and
// returns the path of the binary.
func replayguardBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "replayguard-failover-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "replayguard")
		// failpoints: TestConsumerKilled holds batches between commit and ack
		cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", binary.path, "github.com/replayguard/replayguard/cmd/replayguard")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		binary.out, binary.err = cmd.CombinedOutput()
	})
	if binary.err != nil {
		t.Fatalf("go build ./cmd/replayguard: %v\n%s", binary.err, binary.out)
	}
	return binary.path
}

// skipShort skips the test under -short: every test here starts brokers.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Mosquitto brokers and consumers")
	}
}

// soak reports whether REPLAYGUARD_SOAK=1.
func soak() bool { return os.Getenv(SoakEnv) == "1" }

// seed returns REPLAYGUARD_SEED, or a new seed, and logs it.
func seed(t testing.TB) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv(SeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, v, err)
		}
		s = n
	}
	t.Logf("seed %d (repeat with %s=%d)", s, SeedEnv, s)
	return s
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitStable polls value until it has not changed for quiet, failing the
// test after timeout.
func waitStable(t testing.TB, what string, quiet, timeout time.Duration, value func() uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := value(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("%s still changing after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
		if v := value(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

// testLogger logs to t until the test ends; paho may log from its own
// goroutines a moment later.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() && len(p) > 0 {
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}
