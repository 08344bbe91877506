package forward_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/store/memory"
)

// TestADrainerStopsItsLanesThoughAPollReadHangs: the claims cannot be
// renewed and the poll's read of the held entries does not answer; the
// lanes must still stop before the claims expire (ClaimTTL 300ms), or
// another process claims the outboxes and both drain them at once.
func TestADrainerStopsItsLanesThoughAPollReadHangs(t *testing.T) {
	g := memory.NewGroup(time.Hour, 1000)
	g.SetClaimTTL(300 * time.Millisecond)
	m, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := &failingClaims{Member: m}
	d, cancel, done := runDrainer(t, forward.Options{Store: s, Claimer: s})
	defer func() { cancel(); <-done }()
	draining := func() bool { return len(d.Status().Outputs) > 0 }
	waitFor(t, "the drainer drains its member's outbox", draining)
	s.fail.Store(true)
	s.heldHangs.Store(true)
	deadline := time.Now().Add(3 * time.Second) // ten claim lifetimes
	for draining() {
		if time.Now().After(deadline) {
			t.Fatal("lanes still draining 3s after the claims (ttl 300ms) could not be renewed: Run waits on a poll read with no bound and never renews or gives up its claims")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
