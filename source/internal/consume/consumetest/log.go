package consumetest

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// Logger logs at level and above to t until the test ends: a client
// library may report a connection error from its own goroutine a moment
// later, and testing.T must not be used then.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

// WaitFor polls cond every 5ms and fails the test unless it holds within
// timeout.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
