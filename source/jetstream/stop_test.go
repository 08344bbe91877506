package jetstream_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
)

// warnings passes records on to next and keeps the messages of those at
// warning level and above.
type warnings struct {
	next slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func captureWarnings(next slog.Handler) warnings {
	return warnings{next: next, mu: new(sync.Mutex), msgs: new([]string)}
}

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool { return w.next.Enabled(ctx, l) }
func (w warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return warnings{w.next.WithAttrs(as), w.mu, w.msgs}
}
func (w warnings) WithGroup(g string) slog.Handler {
	return warnings{w.next.WithGroup(g), w.mu, w.msgs}
}
func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		*w.msgs = append(*w.msgs, r.Message)
		w.mu.Unlock()
	}
	return w.next.Handle(ctx, r)
}

func (w warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(*w.msgs)
}

// A consumer stopped while its server is up closes its connection
// without a warning: nothing was lost, and an operator reading the log
// must not look for a fault.
func TestANormalStopWarnsOfNothing(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg := testConfig(t, n.URL())
	logs := captureWarnings(cfg.Logger.Handler())
	cfg.Logger = slog.New(logs)
	publishAll(t, n, readings(20, "m1"))
	c := start(t, cfg, e)
	allAcked(t, n, 10*time.Second)
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // nats.go reports the close from a goroutine of its own
	if w := logs.list(); len(w) > 0 {
		t.Errorf("a normal stop logged warnings: %q", w)
	}
}

// A consumer stopped while its server is down, with messages in hand
// that it cannot commit, ends within ShutdownTimeout: it waited that long
// for the commit, then another 10 s for a server that was not there to
// end its pull, and then for acks it could not send.
func TestAStopWithTheServerDownEndsWithinShutdownTimeout(t *testing.T) {
	n, failing, cfg := failingConsumer(t)
	cfg.ShutdownTimeout = time.Second
	events := &consumetest.Events{}
	cfg.Observer = events
	publishAll(t, n, readings(20, "m1"))
	c := start(t, cfg, failing)
	waitFor(t, "a failed commit", 10*time.Second, func() bool {
		failing.mu.Lock()
		defer failing.mu.Unlock()
		return failing.calls >= 2
	})
	n.Kill()
	waitFor(t, "the loss of the connection seen", 10*time.Second, func() bool { return events.Sum(source.Disconnected) > 0 })
	begun := time.Now()
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begun); took > cfg.ShutdownTimeout+2*time.Second {
		t.Errorf("the stop took %v with ShutdownTimeout %v", took.Round(time.Millisecond), cfg.ShutdownTimeout)
	}
}
