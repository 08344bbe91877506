package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of a held message delivered again by another path than a
// kill between a commit and its acknowledgement (unacked.go): a broker
// restarted or failed over, a connection dropped, a session adopted, any
// redelivery. A delivery that has a key and would be held while an open
// entry holds a message of the same key and content is a duplicate of
// that entry (engine.HeldFinder): releasing a second entry would apply
// the message twice.

// heldEngine is an engine of sharedRoutes on h, without a journal.
func heldEngine(t *testing.T, h *handle) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), h.Store, engine.Options{Routes: sharedRoutes})
	if err != nil {
		t.Fatalf("engine on %q: %v", h.member, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// heldTwo has e apply the two messages before the held ones and hold a
// message below the window and a conflict, at positions 3 and 4 of a
// new chain.
func heldTwo(t *testing.T, e *engine.Engine) []engine.Message {
	t.Helper()
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	held := []engine.Message{incident(1, 1), meter(1, "5")}
	for i, d := range mustProcess(t, e, held...) {
		if !d.Outcome.Held() || d.Held == 0 {
			t.Fatalf("message %d: %s (%s), want held", i, d.Outcome, d.Reason)
		}
	}
	return held
}

// heldIDs are the ids of h's open quarantine entries.
func heldIDs(t *testing.T, h *handle) []uint64 {
	t.Helper()
	var ids []uint64
	for _, q := range scanQuarantine(t, h) {
		ids = append(ids, q.ID)
	}
	return ids
}

// wantHeldAgain checks that d is a duplicate of entry id, naming it.
func wantHeldAgain(t *testing.T, what string, d engine.Decision, id uint64) {
	t.Helper()
	want := fmt.Sprintf("delivered again: held in quarantine as #%d, an open entry of the same key and content", id)
	if d.Outcome != engine.Duplicate || d.Held != 0 || !strings.HasPrefix(d.Reason, want) {
		t.Errorf("%s: %s, held as #%d (%s); want a duplicate naming #%d", what, d.Outcome, d.Held, d.Reason, id)
	}
}

// wantHeldAnew checks that d is held under an entry of its own, not old.
func wantHeldAnew(t *testing.T, what string, d engine.Decision, old uint64) {
	t.Helper()
	if !d.Outcome.Held() || d.Held == 0 || d.Held == old {
		t.Errorf("%s: %s, held as #%d (%s); want held under a new entry, not #%d", what, d.Outcome, d.Held, d.Reason, old)
	}
}

// testHeldAgain: a message held below the window and a conflict,
// delivered again, are duplicates of their entries; a malformed message,
// which has no key, is held again under an entry of its own; the
// quarantine holds one entry for each keyed message.
func testHeldAgain(t *testing.T, p *place) {
	h := p.first(t)
	e := heldEngine(t, h)
	held := heldTwo(t, e)
	ds := mustProcess(t, e, held...)
	wantHeldAgain(t, "the message below the window again", ds[0], h.q(3))
	wantHeldAgain(t, "the conflict again", ds[1], h.q(4))
	bad := engine.Message{Topic: "incidents/fd", Payload: []byte(`{"agency":`)}
	first := mustProcess(t, e, bad)[0]
	again := mustProcess(t, e, bad)[0]
	if first.Outcome != engine.Malformed || again.Outcome != engine.Malformed || again.Held == 0 || again.Held == first.Held {
		t.Errorf("a malformed message twice: held as #%d then #%d (%s); want two entries: without a key it cannot be proven the same", first.Held, again.Held, again.Reason)
	}
	equal(t, "quarantine entries", heldIDs(t, h), []uint64{h.q(3), h.q(4), first.Held, again.Held})
	if d, err := e.Release(t.Context(), h.q(3), "duty officer"); err != nil || d.Outcome != engine.Applied {
		t.Fatalf("release #%d: %+v, %v; want applied", h.q(3), d, err)
	}
	if got := groupField(t, e, "incident/7", "casualties"); got != "1" {
		t.Fatalf("incident/7 casualties = %s, want 1: the message held once, applied once", got)
	}
}

// testHeldTwiceInABatch: two copies of a message in one batch, both to be
// held: the second is a duplicate of the entry the first opens.
func testHeldTwiceInABatch(t *testing.T, p *place) {
	h := p.first(t)
	e := heldEngine(t, h)
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	ds := mustProcess(t, e, incident(1, 1), meter(1, "5"), incident(1, 1), meter(1, "5"))
	wantHeldAgain(t, "the second copy below the window", ds[2], ds[0].Held)
	wantHeldAgain(t, "the second copy of the conflict", ds[3], ds[1].Held)
	equal(t, "quarantine entries", heldIDs(t, h), []uint64{h.q(3), h.q(4)})
}

// testHeldAgainAfterARestart: the index outlives the process.
func testHeldAgainAfterARestart(t *testing.T, p *place) {
	h := p.first(t)
	e := heldEngine(t, h)
	held := heldTwo(t, e)
	e.Close()
	h = p.reopen(t, h)
	e = heldEngine(t, h)
	ds := mustProcess(t, e, held...)
	wantHeldAgain(t, "below the window, after the restart", ds[0], h.q(3))
	wantHeldAgain(t, "the conflict, after the restart", ds[1], h.q(4))
	equal(t, "quarantine entries", heldIDs(t, h), []uint64{h.q(3), h.q(4)})
}

// testHeldAgainAtAnotherMember: a redelivery that reaches another member
// of the group (a session adopted, a shared subscription dealt anew).
func testHeldAgainAtAnotherMember(t *testing.T, p *place) {
	h1 := p.handle(t, "m1")
	held := heldTwo(t, heldEngine(t, h1))
	h2 := p.handle(t, "m2")
	ds := mustProcess(t, heldEngine(t, h2), held...)
	wantHeldAgain(t, "below the window, at m2", ds[0], h1.q(3))
	wantHeldAgain(t, "the conflict, at m2", ds[1], h1.q(4))
	equal(t, "quarantine entries", heldIDs(t, h2), []uint64{h1.q(3), h1.q(4)})
}

// testHeldAgainAfterResolve: an entry released or discarded holds the
// message no more: delivered after that, it is decided as any delivery.
func testHeldAgainAfterResolve(t *testing.T, p *place) {
	ctx := t.Context()
	h := p.first(t)
	e := heldEngine(t, h)
	held := heldTwo(t, e)
	if _, err := e.Discard(ctx, h.q(3), "stale reading", "duty officer"); err != nil {
		t.Fatalf("discard #%d: %v", h.q(3), err)
	}
	if d, err := e.Release(ctx, h.q(4), "duty officer"); err != nil || d.Outcome != engine.Duplicate {
		t.Fatalf("release of the conflict #%d: %+v, %v; want a duplicate", h.q(4), d, err)
	}
	ds := mustProcess(t, e, held...)
	wantHeldAnew(t, "below the window, after its entry was discarded", ds[0], h.q(3))
	wantHeldAnew(t, "the conflict, after its entry was released", ds[1], h.q(4))
	equal(t, "quarantine entries", heldIDs(t, h), []uint64{ds[0].Held, ds[1].Held})
}

// blockedDiscard is a single-owner store whose commits of a release or
// discard wait, once armed, until let go.
type blockedDiscard struct {
	engine.Store
	armed   bool
	entered chan struct{}
	letGo   chan struct{}
}

func (s *blockedDiscard) Commit(ctx context.Context, b *engine.Batch) error {
	if s.armed && len(b.Resolved) > 0 {
		s.armed = false
		close(s.entered)
		<-s.letGo
	}
	return s.Store.Commit(ctx, b)
}

// testHeldAgainWhileDiscarding: on a single owner, the engine lets its
// lock go while an operator's discard commits; a delivery of the entry's
// message decided meanwhile must be held anew, not recorded a duplicate
// of an entry the discard is taking away.
func testHeldAgainWhileDiscarding(t *testing.T, p *place) {
	ctx := t.Context()
	h := p.first(t)
	s := &blockedDiscard{Store: h.Store, entered: make(chan struct{}), letGo: make(chan struct{})}
	e, err := engine.New(ctx, s, engine.Options{Routes: sharedRoutes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	held := heldTwo(t, e)
	s.armed = true
	discarded := make(chan error, 1)
	go func() {
		_, err := e.Discard(ctx, h.q(3), "stale reading", "duty officer")
		discarded <- err
	}()
	<-s.entered
	wait, err := e.Submit(ctx, held[:1])
	close(s.letGo)
	if err != nil {
		t.Fatalf("submit while the discard commits: %v", err)
	}
	ds, err := wait()
	if err != nil {
		t.Fatalf("the delivery decided while the discard committed: %v", err)
	}
	if err := <-discarded; err != nil {
		t.Fatalf("discard #%d: %v", h.q(3), err)
	}
	wantHeldAnew(t, "decided while its entry's discard committed", ds[0], h.q(3))
	equal(t, "quarantine entries", heldIDs(t, h), []uint64{h.q(4), ds[0].Held})
}

// discardingFinder is a member's handle whose HeldFinder, once armed,
// has another member discard the entry it found before it answers, as a
// discard that commits while the batch that relied on the entry is
// decided. It waits for the discard a while: a store that serialises
// every update commits it after the batch instead.
type discardingFinder struct {
	engine.Store
	caps    engine.Capabilities
	discard func(id uint64) error
	armed   bool
	done    chan error // the discard's result, once it returned
	first   bool       // the discard returned before the finder answered
}

func (s *discardingFinder) Capabilities() engine.Capabilities { return s.caps }

func (s *discardingFinder) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	id, found, err := s.inner().FindHeld(ctx, key, content)
	if !found || !s.armed {
		return id, found, err
	}
	s.armed = false
	s.done, s.first = runAWhile(func() error { return s.discard(id) })
	return id, found, err
}

// runAWhile runs another member's step in its own goroutine and waits for
// it a while (300 ms): a store whose locks keep that member waiting for
// the caller's batch has it finish after the batch instead. It returns the
// channel that holds the step's result once it has one, and whether the
// step finished within the wait.
func runAWhile[T any](step func() T) (done chan T, first bool) {
	done = make(chan T, 1)
	go func() { done <- step() }()
	select {
	case got := <-done:
		done <- got
		return done, true
	case <-time.After(300 * time.Millisecond):
		return done, false
	}
}

// inner is the handle's own HeldFinder.
func (s *discardingFinder) inner() engine.HeldFinder { return s.Store.Capabilities().Held }

// testHeldAgainWhileAnotherMemberDiscards: member m1 finds the entry that
// holds a delivery, and m2 discards it before m1's batch commits. m1's
// batch must not be written as a duplicate of the discarded entry: it is
// decided again and the delivery held anew. A store that serialises
// updates commits the discard after m1's batch: then the delivery is a
// duplicate of the entry, and the discard removes it.
func testHeldAgainWhileAnotherMemberDiscards(t *testing.T, p *place) {
	ctx := t.Context()
	h1, h2 := p.handle(t, "m1"), p.handle(t, "m2")
	e2 := heldEngine(t, h2)
	held := heldTwo(t, e2)
	f := &discardingFinder{Store: h1.Store, caps: h1.caps, armed: true, discard: func(id uint64) error {
		_, err := e2.Discard(ctx, id, "stale reading", "duty officer")
		return err
	}}
	f.caps.Held = f
	e1, err := engine.New(ctx, f, engine.Options{Routes: sharedRoutes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e1.Close() })
	d := mustProcess(t, e1, held[0])[0]
	if f.done == nil {
		t.Fatalf("the delivery looked for no entry: %s (%s)", d.Outcome, d.Reason)
	}
	if err := <-f.done; err != nil {
		t.Fatalf("m2's discard of #%d: %v", h2.q(3), err)
	}
	ids := heldIDs(t, h1)
	switch {
	case f.first:
		wantHeldAnew(t, "decided at m1 while m2 discarded its entry", d, h2.q(3))
		equal(t, "quarantine entries", ids, slices.Sorted(slices.Values([]uint64{h2.q(4), d.Held})))
	default:
		t.Logf("the store serialised the discard after m1's batch")
		wantHeldAgain(t, "decided at m1 before m2's discard committed", d, h2.q(3))
		equal(t, "quarantine entries", ids, []uint64{h2.q(4)})
	}
	if slices.Contains(ids, h2.q(3)) {
		t.Errorf("entry #%d discarded, still open", h2.q(3))
	}
}
