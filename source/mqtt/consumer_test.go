package mqtt_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/mqtt"
)

func TestAcknowledgement(t *testing.T) {
	t.Run("nothing is acknowledged before Process returns: a reconnecting client gets it all again", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		cfg := testConfig(t, m.URL())
		cfg.ShutdownTimeout = 200 * time.Millisecond
		rec := newRecorder(t)
		rec.Hook = func(ctx context.Context, _ int, _ []engine.Message) error {
			<-ctx.Done() // a store that never answers
			return ctx.Err()
		}
		r := start(t, cfg, rec)
		r.waitReady(t)
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "a", 10)
		waitFor(t, "a Process call", 5*time.Second, func() bool { return len(rec.Calls()) > 0 })
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if n := rec.Len(); n != 0 {
			t.Fatalf("%d messages committed by a Process that never returned nil", n)
		}
		delivered := keys(t, rec.Calls()[0])

		again := drainSession(t, m.URL(), cfg.ClientID, 300*time.Millisecond)
		if got, want := keys(t, again), seqs("a", 1, 10); !slices.Equal(got, want) {
			t.Fatalf("redelivered %s, want %s", fmtKeys(got), fmtKeys(want))
		}
		for _, msg := range again[:len(delivered)] {
			if !msg.Dup {
				t.Errorf("%v: redelivery of an unacknowledged in-flight message without DUP", keyOf(t, msg))
			}
		}
	})

	t.Run("a Process error acknowledges nothing and the same batch is passed again", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		cfg := testConfig(t, m.URL())
		ev := &events{}
		cfg.Observer = ev
		var r atomic.Pointer[running]
		var readyDuringFailure atomic.Bool
		rec := newRecorder(t)
		rec.Hook = func(_ context.Context, call int, _ []engine.Message) error {
			if call == 1 {
				readyDuringFailure.Store(r.Load().Ready())
			}
			if call < 2 {
				return errors.New("store unavailable")
			}
			return nil
		}
		r.Store(start(t, cfg, rec))
		r.Load().waitReady(t)
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "a", 5)
		waitFor(t, "5 commits", 5*time.Second, func() bool { return rec.Len() == 5 })

		calls := rec.Calls()
		for i := 1; i < 3; i++ {
			if got, want := keys(t, calls[i]), keys(t, calls[0]); !slices.Equal(got, want) {
				t.Fatalf("call %d got %s, want the failed batch %s", i, fmtKeys(got), fmtKeys(want))
			}
		}
		if readyDuringFailure.Load() {
			t.Error("Ready while commits fail")
		}
		if got := ev.Sum(source.CommitFailed); got != 2*len(calls[0]) {
			t.Errorf("CommitFailed events cover %d messages, want %d", got, 2*len(calls[0]))
		}
		waitFor(t, "ready again", 5*time.Second, r.Load().Ready)
		waitFor(t, "5 acks", 5*time.Second, func() bool { return ev.Sum(source.Acked) == 5 })
		if err := r.Load().stop(); err != nil {
			t.Fatal(err)
		}
		if left := drainSession(t, m.URL(), cfg.ClientID, 300*time.Millisecond); len(left) != 0 {
			t.Fatalf("broker still held %s after the retried commit", fmtKeys(keys(t, left)))
		}
	})

	t.Run("every delivery is acknowledged, in the order received", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Verbose: true})
		cfg := testConfig(t, m.URL())
		cfg.BatchSize = 7
		rec := newRecorder(t)
		r := start(t, cfg, rec)
		r.waitReady(t)
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 20}), "a", 100)
		waitFor(t, "100 commits", 10*time.Second, func() bool { return rec.Len() == 100 })
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}

		id := regexp.QuoteMeta(cfg.ClientID)
		sent := brokerMids(m.Log(), regexp.MustCompile(`Sending PUBLISH to `+id+` \(d\d, q1, r\d, m(\d+),`))
		acked := brokerMids(m.Log(), regexp.MustCompile(`Received PUBACK from `+id+` \(Mid: (\d+)`))
		if len(sent) != 100 {
			t.Fatalf("broker logged %d PUBLISH to the consumer, want 100", len(sent))
		}
		if !slices.Equal(acked, sent) {
			t.Fatalf("PUBACK order %v\ndiffers from PUBLISH order %v", acked, sent)
		}
	})

	t.Run("a delivery of a dropped connection is committed but never acknowledged on the next one", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		cfg := testConfig(t, m.URL())
		ev := &events{}
		cfg.Observer = ev
		restarted := make(chan struct{})
		rec := newRecorder(t)
		rec.Hook = func(_ context.Context, call int, _ []engine.Message) error {
			if call == 0 {
				<-restarted
			}
			return nil
		}
		r := start(t, cfg, rec)
		r.waitReady(t)
		// The broker sends each message as it is published; the first
		// Process call may take all of them or only the first few (the
		// batch closes at its linger), and the rest wait in hand behind it.
		const n = 5
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: n}), "a", n)
		waitFor(t, "a Process call", 5*time.Second, func() bool { return len(rec.Calls()) > 0 })
		waitFor(t, "every delivery in hand", 5*time.Second, func() bool { return ev.Sum(source.Received) == n })

		m.Stop() // saves the session, every delivery unacknowledged
		m.Restart()
		waitFor(t, "a reconnect", 10*time.Second, func() bool { return ev.Sum(source.Connected) == 2 })
		close(restarted)
		// The first connection's n deliveries, then the broker's n resends.
		waitFor(t, "redeliveries committed", 10*time.Second, func() bool { return rec.Len() == 2*n })

		if got := ev.Sum(source.AckDropped); got != n {
			t.Errorf("%d acknowledgements dropped, want the dropped connection's %d", got, n)
		}
		for _, msg := range rec.Committed()[n:] {
			if !msg.Dup {
				t.Errorf("%v: resent on the resumed session without DUP", keyOf(t, msg))
			}
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if left := drainSession(t, m.URL(), cfg.ClientID, 300*time.Millisecond); len(left) != 0 {
			t.Fatalf("broker still held %s", fmtKeys(keys(t, left)))
		}
	})
}

func brokerMids(log string, re *regexp.Regexp) []string {
	var mids []string
	for _, m := range re.FindAllStringSubmatch(log, -1) {
		mids = append(mids, m[1])
	}
	return mids
}

func TestStop(t *testing.T) {
	t.Run("Run commits and acknowledges what is in hand, then returns nil", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		cfg := testConfig(t, m.URL())
		cfg.BatchSize = 5
		rec := newRecorder(t)
		rec.Hook = func(context.Context, int, []engine.Message) error {
			time.Sleep(20 * time.Millisecond) // a slow store: deliveries pile up
			return nil
		}
		r := start(t, cfg, rec)
		r.waitReady(t)
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 50}), "a", 50)
		waitFor(t, "a first commit", 5*time.Second, func() bool { return rec.Len() > 0 })
		atStop := rec.Len()
		if err := r.stop(); err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
		committed := keys(t, rec.Committed())
		if int64(len(committed)) <= atStop+int64(cfg.BatchSize) {
			t.Errorf("committed %d after stop began with %d: the deliveries in hand were not drained", len(committed), atStop)
		}

		left := keys(t, drainSession(t, m.URL(), cfg.ClientID, 300*time.Millisecond))
		for _, k := range left {
			if slices.Contains(committed, k) {
				t.Errorf("%v committed yet left unacknowledged", k)
			}
		}
		all := append(committed, left...)
		slices.SortFunc(all, func(a, b key) int { return int(a.Seq - b.Seq) })
		if want := seqs("a", 1, 50); !slices.Equal(all, want) {
			t.Fatalf("committed then redelivered %s, want each of %s once", fmtKeys(all), fmtKeys(want))
		}
	})
}

// TestSharedSubscription splits a filter's messages over a share group's
// members, and gives each member every message of an Unshared filter.
func TestSharedSubscription(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	recs := []*recorder{newRecorder(t), newRecorder(t)}
	for _, rec := range recs {
		cfg := testConfig(t, m.URL())
		cfg.ShareGroup = "workers"
		cfg.Filters = append(cfg.Filters, mqtt.Filter{Topic: "replayguard/plain/#", QoS: 1, Unshared: true})
		start(t, cfg, rec).waitReady(t)
	}
	publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "a", 40)
	plain := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Topic: func(s string) string { return "replayguard/plain/" + s }})
	publish(t, plain, "p", 10)
	waitFor(t, "40 commits and 10 to each", 10*time.Second, func() bool { return recs[0].Len()+recs[1].Len() == 60 })

	var a, b []key
	for i, rec := range recs {
		var got []key
		for _, k := range keys(t, rec.Committed()) {
			if k.Source == "p" {
				got = append(got, k)
			} else if i == 0 {
				a = append(a, k)
			} else {
				b = append(b, k)
			}
		}
		if want := seqs("p", 1, 10); !slices.Equal(got, want) {
			t.Fatalf("member %d got %s of the unshared filter, want %s in order", i+1, fmtKeys(got), fmtKeys(want))
		}
	}
	t.Logf("split %d / %d", len(a), len(b))
	if len(a) == 0 || len(b) == 0 {
		t.Fatalf("one member got everything: %d / %d", len(a), len(b))
	}
	all := append(a, b...)
	slices.SortFunc(all, func(x, y key) int { return int(x.Seq - y.Seq) })
	if want := seqs("a", 1, 40); !slices.Equal(all, want) {
		t.Fatalf("group got %s, want each of %s once", fmtKeys(all), fmtKeys(want))
	}
}

func TestFailover(t *testing.T) {
	t.Run("when the first broker dies the consumer moves to the second", func(t *testing.T) {
		primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		second := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		cfg := testConfig(t, primary.URL(), second.URL())
		ev := &events{}
		cfg.Observer = ev
		rec := newRecorder(t)
		r := start(t, cfg, rec)
		r.waitReady(t)
		if e, _ := ev.Last(source.Connected); e.Broker != primary.URL() {
			t.Fatalf("connected to %q first, want the primary %q", e.Broker, primary.URL())
		}

		primary.Kill()
		waitFor(t, "a connection to the second broker", 10*time.Second, func() bool {
			e, _ := ev.Last(source.Connected)
			return e.Broker == second.URL() && r.Ready()
		})
		publish(t, testbroker.NewPublisher(t, []string{second.URL()}, testbroker.PublisherOptions{}), "a", 5)
		waitFor(t, "5 commits", 5*time.Second, func() bool { return rec.Len() == 5 })
		for _, msg := range rec.Committed() {
			if msg.Broker != second.URL() {
				t.Errorf("%v: Broker = %q, want %q", keyOf(t, msg), msg.Broker, second.URL())
			}
		}
	})

	t.Run("a standby restored from a snapshot older than the acks replays applied messages without DUP", func(t *testing.T) {
		primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		standbyPort := testbroker.FreePort(t)
		standbyURL := "tcp://127.0.0.1:" + itoa(standbyPort)
		cfg := testConfig(t, primary.URL(), standbyURL)
		ev := &events{}
		cfg.Observer = ev
		offline := start(t, cfg, newRecorder(t)) // creates the session and its subscription
		offline.waitReady(t)
		if err := offline.stop(); err != nil {
			t.Fatal(err)
		}
		pub := testbroker.NewPublisher(t, []string{primary.URL()}, testbroker.PublisherOptions{})
		publish(t, pub, "a", 20)
		snap := primary.SnapshotDB() // the session holds the 20, none acknowledged

		rec := newRecorder(t)
		start(t, cfg, rec)
		waitFor(t, "20 commits and acks", 10*time.Second, func() bool { return ev.Sum(source.Acked) == 20 })
		primary.Kill()
		testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: standbyPort})
		waitFor(t, "20 replays", 10*time.Second, func() bool { return rec.Len() == 40 })

		for _, want := range seqs("a", 1, 20) {
			if n := rec.Count(want); n != 2 {
				t.Errorf("%v committed %d times, want 2 (applied, then replayed)", want, n)
			}
		}
		for _, msg := range rec.Committed()[20:] {
			if msg.Dup {
				t.Errorf("%v replayed with DUP=1; the standby never sent it before", keyOf(t, msg))
			}
			if msg.Broker != standbyURL {
				t.Errorf("%v replayed through %q, want %q", keyOf(t, msg), msg.Broker, standbyURL)
			}
		}
		if got := len(pub.Acked()); got != 20 {
			t.Errorf("publisher recorded %d acks, want 20", got)
		}
	})

	t.Run("a broker that stops answering is left for the next one after the keepalive", func(t *testing.T) {
		primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
		second := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
		cfg := testConfig(t, primary.URL(), second.URL())
		cfg.KeepAlive = time.Second
		cfg.ConnectTimeout = time.Second
		ev := &events{}
		cfg.Observer = ev
		r := start(t, cfg, newRecorder(t))
		r.waitReady(t)

		primary.Pause()
		waitFor(t, "a connection to the second broker", 10*time.Second, func() bool {
			e, _ := ev.Last(source.Connected)
			return e.Broker == second.URL()
		})
		if _, ok := ev.Last(source.Stalled); !ok {
			t.Error("no Stalled event")
		}
	})
}

func TestBackpressure(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, m.URL())
	cfg.ReceiveMaximum, cfg.BatchSize = 10, 5
	ev := &events{}
	cfg.Observer = ev
	release := make(chan struct{})
	rec := newRecorder(t)
	rec.Hook = func(ctx context.Context, _ int, _ []engine.Message) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r := start(t, cfg, rec)
	r.waitReady(t)
	publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 50}), "a", 50)

	waitFor(t, "ReceiveMaximum deliveries", 5*time.Second, func() bool { return ev.Sum(source.Received) >= 10 })
	time.Sleep(300 * time.Millisecond)
	if got := ev.Sum(source.Received); got != 10 {
		t.Fatalf("a stuck store holds %d deliveries, want ReceiveMaximum (10)", got)
	}
	close(release)
	waitFor(t, "all 50 committed once the store answers", 10*time.Second, func() bool { return rec.Len() == 50 })
}

func TestSubscription(t *testing.T) {
	t.Run("two routes on one filter make one subscription", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
		cfg := testConfig(t, m.URL())
		cfg.Filters = []mqtt.Filter{{Topic: testFilter, QoS: 1}, {Topic: testFilter, QoS: 2}}
		rec := newRecorder(t)
		start(t, cfg, rec).waitReady(t)
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "a", 3)
		waitFor(t, "3 commits", 5*time.Second, func() bool { return rec.Len() == 3 })
		time.Sleep(50 * time.Millisecond)
		if n := rec.Len(); n != 3 {
			t.Fatalf("%d commits, want 3", n)
		}
	})

	t.Run("a broker granting only QoS 0 ends Run with ErrSubscribe", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, Extra: []string{"max_qos 0"}})
		cfg := testConfig(t, m.URL())
		tr := &connTracker{}
		cfg.Observer = tr
		r := start(t, cfg, newRecorder(t))
		select {
		case <-r.run.Done():
			if err := r.run.Err(); !errors.Is(err, mqtt.ErrSubscribe) {
				t.Fatalf("Run = %v, want ErrSubscribe", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run still consuming from a broker that grants QoS 0")
		}
		// A feed's connected metric hears the end, though autopaho
		// reports no connection down after a Disconnect.
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(tr.conns) != 1 || len(tr.downs) != 1 {
			t.Fatalf("%d connections, %d disconnections observed; want one of each", len(tr.conns), len(tr.downs))
		}
	})
}

// preparingRecorder is a recorder whose Prepare notes each message it saw.
type preparingRecorder struct {
	*recorder
	t        testing.TB
	mu       sync.Mutex
	prepared map[key]bool
}

func (p *preparingRecorder) Prepare(msgs []engine.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.prepared[keyOf(p.t, m)] = true
	}
}

func (p *preparingRecorder) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	p.mu.Lock()
	for _, m := range msgs {
		if k := keyOf(p.t, m); !p.prepared[k] {
			p.t.Errorf("%v reached Process unprepared", k)
		}
	}
	p.mu.Unlock()
	return p.recorder.Process(ctx, msgs)
}

func TestPrepare(t *testing.T) {
	t.Run("a Processor that can decode ahead has every message prepared before Process", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
		rec := &preparingRecorder{recorder: newRecorder(t), t: t, prepared: map[key]bool{}}
		start(t, testConfig(t, m.URL()), rec).waitReady(t)
		publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "a", 20)
		waitFor(t, "20 commits", 10*time.Second, func() bool { return rec.Len() == 20 })
	})
}

// A standby restored from the primary's mosquitto.db answers "session
// present" without the group's $share subscriptions: Mosquitto 2.0.11
// persists plain subscriptions only (BROKERS.md). Members that subscribed
// only on a new session would receive nothing more.
func TestSharedSubscriptionAfterFailoverToARestoredStandby(t *testing.T) {
	primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	standbyPort := testbroker.FreePort(t)
	standbyURL := fmt.Sprintf("tcp://127.0.0.1:%d", standbyPort)
	recs := []*recorder{newRecorder(t), newRecorder(t), newRecorder(t)}
	evs := make([]*events, len(recs))
	for i, rec := range recs {
		cfg := testConfig(t, primary.URL(), standbyURL)
		cfg.ShareGroup = "workers"
		evs[i] = &events{}
		cfg.Observer = evs[i]
		start(t, cfg, rec).waitReady(t)
	}
	total := func() int64 {
		var n int64
		for _, rec := range recs {
			n += rec.Len()
		}
		return n
	}
	pub := testbroker.NewPublisher(t, []string{primary.URL(), standbyURL}, testbroker.PublisherOptions{})
	publish(t, pub, "a", 30)
	waitFor(t, "30 commits on the primary", 10*time.Second, func() bool { return total() == 30 })

	snapshot := primary.SnapshotDB() // the members' sessions, saved after they subscribed
	primary.Kill()
	testbroker.StartFromSnapshotWith(t, snapshot, testbroker.MosquittoOptions{Port: standbyPort})
	for i, ev := range evs {
		waitFor(t, fmt.Sprintf("member %d on the standby", i), 10*time.Second, func() bool { return ev.Sum(source.Connected) == 2 })
	}
	if err := pub.AwaitConnection(context.Background()); err != nil { // on the standby
		t.Fatal(err)
	}
	publish(t, pub, "b", 30)
	waitFor(t, "the standby's 30 messages committed by the group", 10*time.Second, func() bool {
		var n int
		for _, rec := range recs {
			for _, k := range keys(t, rec.Committed()) {
				if k.Source == "b" {
					n++
				}
			}
		}
		return n == 30
	})
}
