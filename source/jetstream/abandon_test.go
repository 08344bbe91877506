package jetstream_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The messages a stopping consumer could not commit go to the next
// consumer of the durable at once, not after AckWait: they are
// negatively acknowledged once this consumer's pull is over, so that the
// server does not deliver them again to a pull nobody reads.
func TestAbandonedGoToTheNextConsumerAtOnce(t *testing.T) {
	n, failing, cfg := failingConsumer(t)
	e := failing.p.(*engine.Engine)
	cfg.AckWait = 10 * time.Second
	cfg.BatchSize = 8
	cfg.ShutdownTimeout = 300 * time.Millisecond
	msgs := readings(40, "m1")
	publishAll(t, n, msgs)
	first := start(t, cfg, failing)
	waitFor(t, "a few failed commits", 10*time.Second, func() bool {
		failing.mu.Lock()
		defer failing.mu.Unlock()
		return failing.calls >= 3
	})
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	rec := newRecorder(e)
	start(t, cfg, rec)
	allAcked(t, n, 2*cfg.AckWait)
	if took := time.Since(stopped); took > cfg.AckWait/2 {
		t.Errorf("the next consumer had every message %v after the first stopped, want well within AckWait (%v)", took.Round(time.Millisecond), cfg.AckWait)
	}
	if got := kwh(e, "m1"); got != "40" || rec.count(engine.Applied)+rec.count(engine.AppliedLate) != len(msgs) {
		t.Errorf("meter/m1 kwh = %s, applied %d; want 40 and %d", got, rec.count(engine.Applied)+rec.count(engine.AppliedLate), len(msgs))
	}
	if got := rec.count(engine.Duplicate); got != 0 {
		t.Errorf("%d duplicates: the server delivered a message again", got)
	}
}
