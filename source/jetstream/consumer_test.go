package jetstream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

// A nats-server killed with SIGKILL mid-stream and restarted on the same
// store loses nothing and doubles nothing: every reading applied once,
// whatever the server delivers again.
func TestServerKilledMidStream(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	rec := newRecorder(e)
	c := start(t, testConfig(t, n.URL()), rec)
	const perMeter = 600
	msgs := readings(perMeter, "m1", "m2", "m3")
	pub, err := testbroker.PublishJS(n.URL(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a third of the feed applied", 30*time.Second, func() bool { return rec.count(engine.Applied) >= len(msgs)/3 })
	n.Kill()
	time.Sleep(100 * time.Millisecond)
	n.Restart()
	if err := pub.Wait(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// What the killed server acknowledged but had not written yet is lost
	// from the stream: publish the feed again so that the stream holds
	// every reading, and replayguard must apply each exactly once.
	if err := testbroker.PublishAgain(n.URL(), msgs, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	applied := func() int { return rec.count(engine.Applied) + rec.count(engine.AppliedLate) }
	waitFor(t, "every reading applied", 60*time.Second, func() bool { return applied() >= len(msgs) })
	allAcked(t, n, 30*time.Second)
	for _, m := range []string{"m1", "m2", "m3"} {
		if got := kwh(e, m); got != strconv.Itoa(perMeter) {
			t.Errorf("meter/%s kwh = %s, want %d: a reading was lost or applied twice", m, got, perMeter)
		}
	}
	if got := applied(); got != len(msgs) {
		t.Errorf("applied %d, want %d", got, len(msgs))
	}
	for _, o := range []engine.Outcome{engine.Conflict, engine.Quarantined, engine.Malformed} {
		if got := rec.count(o); got != 0 {
			t.Errorf("%v: %d, want 0", o, got)
		}
	}
	stored := n.StreamMessages(testStream)
	if stored < uint64(len(msgs)) {
		t.Errorf("the stream holds %d messages, fewer than the %d published", stored, len(msgs))
	}
	t.Logf("the stream holds %d messages for %d readings; found duplicate: %d, applied late (a gap the feed published again filled): %d",
		stored, len(msgs), rec.count(engine.Duplicate), rec.count(engine.AppliedLate))
	waitFor(t, "ready after the restart", 10*time.Second, c.Ready)
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
}

// A batch committed whose acks never reach the server (the store's answer
// lost, the consumer stopped before it could commit again) is delivered
// again to the next consumer: the copies carry the delivery count as dup
// in their audit records and are found duplicate; the first copies are
// applied once.
func TestRedeliveryIsRecordedAsDup(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	cfg := testConfig(t, n.URL())
	cfg.AckWait = time.Second
	cfg.BatchSize, cfg.BatchLinger = 8, 50*time.Millisecond
	cfg.ShutdownTimeout = 200 * time.Millisecond
	msgs := readings(8, "m1")
	pub, err := testbroker.PublishJS(n.URL(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	lost := &answerLost{p: e}
	first := start(t, cfg, lost)
	waitFor(t, "the batch committed and tried again", 10*time.Second, func() bool { return lost.calls.Load() >= 2 })
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(e)
	start(t, cfg, rec)
	waitFor(t, "the redelivered copies decided", 20*time.Second, func() bool { return rec.count(engine.Duplicate) >= len(msgs) })
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "8" {
		t.Errorf("meter/m1 kwh = %s, want 8", got)
	}
	var dups, applied int
	err = st.ScanAudit(context.Background(), 0, func(r engine.AuditRecord) error {
		switch {
		case r.Outcome == "duplicate" && r.Dup:
			dups++
		case r.Outcome == "applied" && !r.Dup:
			applied++
		default:
			t.Errorf("audit record %d: outcome %s with dup %v", r.Position, r.Outcome, r.Dup)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(msgs) || dups < len(msgs) {
		t.Errorf("audit: %d applied without dup, %d duplicates with dup; want %d and at least %d", applied, dups, len(msgs), len(msgs))
	}
}

// A failing commit acknowledges nothing and is retried; Ready says no
// meanwhile, and the server holds the batch as pending.
func TestCommitFailureAcksNothing(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	rec := newRecorder(e)
	rec.fail.Store(1 << 20)
	cfg := testConfig(t, n.URL())
	cfg.CommitRetryMin, cfg.CommitRetryMax = 20*time.Millisecond, 20*time.Millisecond
	msgs := readings(10, "m1")
	pub, err := testbroker.PublishJS(n.URL(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	c := start(t, cfg, rec)
	waitFor(t, "a few failed commits", 10*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.calls >= 3
	})
	if c.Ready() {
		t.Error("Ready while commits fail")
	}
	info, err := n.ConsumerInfo(testStream, testConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != len(msgs) || info.AckFloor.Stream != 0 {
		t.Errorf("server: %d pending acks, acked through %d; want %d and 0", info.NumAckPending, info.AckFloor.Stream, len(msgs))
	}
	rec.fail.Store(0)
	allAcked(t, n, 10*time.Second)
	waitFor(t, "ready again", 5*time.Second, c.Ready)
	if got := kwh(e, "m1"); got != "10" {
		t.Errorf("meter/m1 kwh = %s, want 10", got)
	}
}

// A subject that has no unambiguous topic is malformed with the reason,
// and acknowledged like any decided message.
func TestMalformedSubject(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	rec := newRecorder(e)
	pub, err := testbroker.PublishJS(n.URL(), []testbroker.JSMessage{
		{Subject: "plant.a/b.energy", Data: []byte(`{"seq":1,"kwh":1}`), ID: "x"},
		{Subject: "plant.m1.energy", Data: []byte(`{"seq":1,"kwh":1}`), ID: "y"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	start(t, testConfig(t, n.URL()), rec)
	allAcked(t, n, 10*time.Second)
	waitFor(t, "both decided", 5*time.Second, func() bool { return rec.count(engine.Malformed)+rec.count(engine.Applied) == 2 })
	err = st.ScanAudit(context.Background(), 0, func(r engine.AuditRecord) error {
		if r.Outcome == "malformed" && (r.Topic != "plant.a/b.energy" || !strings.Contains(r.Reason, "not NATS's MQTT escape")) {
			t.Errorf("malformed record: topic %q, reason %q", r.Topic, r.Reason)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.count(engine.Malformed) != 1 {
		t.Errorf("malformed %d, want 1", rec.count(engine.Malformed))
	}
}

// A stream that does not exist ends Run with ErrStream, naming it.
func TestMissingStream(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	e, _ := meters(t)
	c, err := jetstream.New(testConfig(t, n.URL()), e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), `"PLANT"`) {
		t.Fatalf("Run = %v, want ErrStream naming the stream", err)
	}
}

// A durable consumer that is gone when the connection comes back ends Run
// with ErrConsumerDeleted once the connection is back, rather than pulling
// from nothing while Ready says yes: nats-server (2.9) neither answers a
// pull for a consumer it lacks nor says it has no responders, its
// JetStream API taking the request, so the consumer asks at the
// reconnect. Two ways to lose it: the server restarted on an empty store
// and the stream created again (the stream may be missing when the
// consumer asks: the heartbeats, 30 s, catch it then), or the consumer's
// state alone gone from the store.
func TestConsumerGoneAfterServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		within time.Duration
		lose   func(t *testing.T, n *testbroker.NATS)
		after  func(n *testbroker.NATS)
	}{
		{"an empty store, the stream created again", 50 * time.Second,
			func(t *testing.T, n *testbroker.NATS) {
				if err := os.RemoveAll(filepath.Join(n.Dir(), "jetstream")); err != nil {
					t.Fatal(err)
				}
			},
			func(n *testbroker.NATS) { n.CreateStream(testStream, "plant.>") }},
		{"the consumer's state alone", 10 * time.Second,
			func(t *testing.T, n *testbroker.NATS) {
				obs, err := filepath.Glob(filepath.Join(n.Dir(), "jetstream", "jetstream", "*", "streams", testStream, "obs", testConsumer))
				if err != nil || len(obs) != 1 {
					t.Fatalf("the consumer's state in the store: %v %v", obs, err)
				}
				if err := os.RemoveAll(obs[0]); err != nil {
					t.Fatal(err)
				}
			},
			func(*testbroker.NATS) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testbroker.StartNATS(t, testbroker.NATSOptions{})
			n.CreateStream(testStream, "plant.>")
			e, _ := meters(t)
			c, err := jetstream.New(testConfig(t, n.URL()), e)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			waitFor(t, "ready", 10*time.Second, c.Ready)
			n.Stop()
			tc.lose(t, n)
			n.Restart()
			back := time.Now()
			tc.after(n)
			select {
			case err := <-done:
				if !errors.Is(err, jetstream.ErrConsumerDeleted) {
					t.Fatalf("Run = %v, want ErrConsumerDeleted", err)
				}
				t.Logf("Run ended %v after the restart: %v", time.Since(back).Round(time.Millisecond), err)
			case <-time.After(tc.within):
				t.Errorf("Run still pulling %v after the restart from a consumer the server no longer has; Ready %v", tc.within, c.Ready())
				cancel()
				<-done
			}
		})
	}
}

// Several subjects on a server older than 2.10, which cannot filter on
// more than one, end Run with ErrStream naming them, rather than a bind
// retried for ever.
func TestSubjectsRefusedByOldServer(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	v := nc.ConnectedServerVersion()
	nc.Close()
	if !strings.HasPrefix(v, "2.9.") {
		t.Skipf("nats-server %s filters on several subjects", v)
	}
	e, _ := meters(t)
	cfg := testConfig(t, n.URL())
	cfg.Subjects = []string{"plant.m1.>", "plant.m2.>"}
	c, err := jetstream.New(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), "2.10") {
		t.Fatalf("Run = %v, want ErrStream saying the subjects need nats-server 2.10", err)
	}
}

// A consumer deleted while a batch commits ends Run with
// ErrConsumerDeleted, whichever of the ended pull and the deletion the
// consumer notices first.
func TestConsumerDeletedDuringCommit(t *testing.T) {
	for i := range 10 {
		n := testbroker.StartNATS(t, testbroker.NATSOptions{})
		n.CreateStream(testStream, "plant.>")
		e, _ := meters(t)
		rec := newRecorder(e)
		rec.slow.Store(int64(500 * time.Millisecond))
		c, err := jetstream.New(testConfig(t, n.URL()), rec)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := testbroker.PublishJS(n.URL(), readings(3, "m1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(context.Background()) }()
		waitFor(t, "a commit under way", 10*time.Second, func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return rec.calls > 0
		})
		n.DeleteConsumer(testStream, testConsumer)
		if err := <-done; !errors.Is(err, jetstream.ErrConsumerDeleted) {
			t.Fatalf("attempt %d: Run = %v, want ErrConsumerDeleted", i, err)
		}
	}
}
