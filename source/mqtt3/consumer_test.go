package mqtt3

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestConsumeAndAcknowledge(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, b.URL())
	ev := &events{}
	cfg.Observer = ev
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "s1", 500)
	waitFor(t, "500 commits", 10*time.Second, func() bool { return rec.Len() == 500 })
	waitFor(t, "500 acks", 10*time.Second, func() bool { return ev.Sum(Acked) == 500 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(t, rec.Committed()), seqs("s1", 1, 500); !slices.Equal(got, want) {
		t.Fatalf("committed %s, want %s in order", fmtKeys(got), fmtKeys(want))
	}
	if ev.Sum(Received) != 500 || ev.Sum(Committed) != 500 || ev.Sum(AckDropped) != 0 {
		t.Errorf("received %d, committed %d, ack dropped %d", ev.Sum(Received), ev.Sum(Committed), ev.Sum(AckDropped))
	}
	if left := drainSession(t, b.URL(), cfg.ClientID, 300*time.Millisecond); len(left) != 0 {
		t.Errorf("the session still held %d messages: %s", len(left), fmtKeys(keys(t, left)))
	}
}

func TestUncommittedIsRedelivered(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, b.URL())
	failing := newRecorder(t)
	failing.Hook = func(context.Context, int, []engine.Message) error { return errors.New("store down") }
	r := start(t, cfg, failing)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{Window: 20})
	publish(t, pub, "s1", 50)
	waitFor(t, "a commit attempt", 10*time.Second, func() bool { return len(failing.Calls()) > 0 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	got := drainSession(t, b.URL(), cfg.ClientID, 300*time.Millisecond)
	// Mosquitto resends the messages in flight first, in its own order.
	ks := keys(t, got)
	slices.SortFunc(ks, func(a, b key) int { return int(a.Seq - b.Seq) })
	if want := seqs("s1", 1, 50); !slices.Equal(ks, want) {
		t.Fatalf("redelivered %s, want %s", fmtKeys(ks), fmtKeys(want))
	}
	dups := 0
	for _, m := range got {
		if m.Dup {
			dups++
		}
	}
	if dups == 0 {
		t.Error("no redelivered message carries the DUP flag, though every one was sent before")
	}
}
