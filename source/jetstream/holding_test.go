package jetstream_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

// inHandConfig is testConfig with a short AckWait, batches smaller than
// the feed (a batch committing, others queued behind it) and the default
// commit retries, whose waits grow past AckWait.
func inHandConfig(t testing.TB, url string) jetstream.Config {
	cfg := testConfig(t, url)
	cfg.AckWait = time.Second
	cfg.BatchSize = 8
	cfg.CommitRetryMin, cfg.CommitRetryMax = jetstream.DefaultCommitRetryMin, jetstream.DefaultCommitRetryMax
	return cfg
}

// A store that fails, or a commit that hangs (a store that does not
// answer), for several times AckWait gets the messages in hand delivered
// once: the batch whose commit is retried or waits, however long, and the
// messages queued behind it are kept in progress: ack_wait need not cover
// a commit.
func TestNoRedeliveryWhileCommitsFailOrHang(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*recorder)
	}{
		{"the store fails for 4s", func(r *recorder) { r.down.Store(int64(4 * time.Second)) }},
		{"a commit hangs for 3s", func(r *recorder) { r.slow.Store(int64(3 * time.Second)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testbroker.StartNATS(t, testbroker.NATSOptions{})
			n.CreateStream(testStream, "plant.>")
			e, st := meters(t)
			rec := newRecorder(e)
			tc.fault(rec)
			publishAll(t, n, readings(40, "m1"))
			start(t, inHandConfig(t, n.URL()), rec)
			allAcked(t, n, 30*time.Second)
			if got := kwh(e, "m1"); got != "40" {
				t.Errorf("meter/m1 kwh = %s, want 40", got)
			}
			if got := redelivered(t, st); got != 0 {
				t.Errorf("%d decisions on messages the server delivered again while they were in hand, want 0", got)
			}
		})
	}
}
