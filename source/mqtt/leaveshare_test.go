package mqtt_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A member of a share group that stops with leave granted first decides
// every message its session held at that moment (dealt to it, not yet
// delivered), and the broker deals the group's later messages to the
// member still running: none waits in the stopped member's session.
func TestAMemberLeavingItsShareGroupDecidesWhatItsSessionHeld(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, MaxInflight: 10})
	cfg := testConfig(t, m.URL())
	cfg.ShareGroup = "workers"
	stay := newRecorder(t)
	start(t, cfg, stay).waitReady(t)

	release := make(chan struct{})
	var asks atomic.Int32
	cfg.ClientID = testbroker.UniqueClientID("rg-leaving")
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.ReceiveMaximum, cfg.BatchSize = 5, 5
	cfg.LeaveShare = func(ctx context.Context) (bool, error) {
		asks.Add(1)
		return true, nil
	}
	leaving := newRecorder(t)
	// Its first batch waits until it has asked to leave: with a receive
	// maximum of 5, the rest of its share queues in its session at the
	// broker meanwhile.
	leaving.Hook = func(ctx context.Context, call int, msgs []engine.Message) error {
		if call == 0 {
			<-release
		}
		return nil
	}
	r := start(t, cfg, leaving)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before the run is stopped at the end, if the test fails first
	r.waitReady(t)

	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "a", 200) // dealt between the two sessions once acknowledged
	waitFor(t, "the leaving member's first batch", 10*time.Second, func() bool { return len(leaving.Calls()) > 0 })
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	waitFor(t, "the leaving member asking to leave", 10*time.Second, func() bool { return asks.Load() > 0 })
	unblock()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	held := leaving.Len()
	t.Logf("the leaving member decided %d before it stopped, the other %d so far", held, stay.Len())
	waitFor(t, "every message decided by one member or the other", 10*time.Second, func() bool { return held+stay.Len() >= 200 })
	if got := leaving.Len(); got != held {
		t.Fatalf("the leaving member decided %d after it stopped", got-held)
	}
	for _, k := range seqs("a", 1, 200) {
		if n := leaving.Count(k) + stay.Count(k); n != 1 {
			t.Errorf("%v decided %d times, want once", k, n)
		}
	}

	publish(t, pub, "b", 100)
	waitFor(t, "the member still running deciding every later message", 10*time.Second, func() bool {
		for _, k := range seqs("b", 1, 100) {
			if stay.Count(k) != 1 {
				return false
			}
		}
		return true
	})
}
