package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// heldAt is a member's decision of one delivery, and its error.
type heldAt struct {
	d   engine.Decision
	err error
}

// racingFinder is a member's handle whose HeldFinder, once armed, has
// another member hold the same message before it answers that no entry
// holds it: two members deciding the same delivery at the same moment,
// before either's commit is visible to the other. It waits for the other
// member a while: a store whose row locks keep the other member waiting
// for this one's batch has it decide after that batch instead.
type racingFinder struct {
	engine.Store
	caps  engine.Capabilities
	hold  func() heldAt
	armed bool
	done  chan heldAt // the other member's decision, once it returned
	first bool        // the other member decided before the finder answered
}

func (s *racingFinder) Capabilities() engine.Capabilities { return s.caps }

func (s *racingFinder) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	id, found, err := s.Store.Capabilities().Held.FindHeld(ctx, key, content)
	if found || err != nil || !s.armed {
		return id, found, err
	}
	s.armed = false
	s.done, s.first = runAWhile(s.hold)
	return id, found, err
}

// heldAtTwoMembersAtOnce: two members hold msg at once, each finding no
// entry of it. The second batch to commit loses the race, is decided
// again and finds the first one's entry: one entry holds the message, and
// the other delivery is a duplicate naming it. Two entries would apply
// the message twice once both were released.
func heldAtTwoMembersAtOnce(msg engine.Message) func(t *testing.T, p *place) {
	return func(t *testing.T, p *place) { heldAtOnce(t, p, msg) }
}

// readingRoutes are sharedRoutes and a route of readings by id, forwarded
// downstream: a conflict of theirs locks no row another member's batch
// holding it too would wait for.
var readingRoutes = append(slices.Clone(sharedRoutes), engine.Route{Name: "readings", Topic: "readings/+", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{topic}"}}}})

// reading is a message of the readings route.
func reading(id int, kwh string) engine.Message {
	return engine.Message{Topic: "readings/m1", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":%s}`, id, kwh)}
}

func heldAtOnce(t *testing.T, p *place, msg engine.Message) {
	ctx := t.Context()
	h1, h2 := p.handle(t, "m1"), p.handle(t, "m2")
	e2, err := engine.New(ctx, h2.Store, engine.Options{Routes: readingRoutes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	mustProcess(t, e2, incident(100000, 0), meter(1, "1"), reading(1, "1"))
	f := &racingFinder{Store: h1.Store, caps: h1.caps, armed: true, hold: func() heldAt {
		ds, err := e2.Process(ctx, []engine.Message{msg})
		if err != nil {
			return heldAt{err: err}
		}
		return heldAt{d: ds[0]}
	}}
	f.caps.Held = f
	e1, err := engine.New(ctx, f, engine.Options{Routes: readingRoutes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e1.Close() })
	d1 := mustProcess(t, e1, msg)[0]
	if f.done == nil {
		t.Fatalf("m1 looked for no entry: %s (%s)", d1.Outcome, d1.Reason)
	}
	got := <-f.done
	if got.err != nil {
		t.Fatalf("m2: %v", got.err)
	}
	d2 := got.d
	if !f.first {
		t.Logf("the store kept m2 waiting for m1's batch, or m2 took longer than the finder waits")
	}
	// Whichever member's batch committed first holds the message; the
	// other's, decided again, is a duplicate naming its entry.
	held, again, names := d1, d2, "m2, whose batch committed second"
	if d2.Outcome.Held() && d2.Held != 0 {
		held, again, names = d2, d1, "m1, whose batch committed second"
	}
	if !held.Outcome.Held() || held.Held == 0 {
		t.Fatalf("neither member held the message: m1 %s (%s), m2 %s (%s)", d1.Outcome, d1.Reason, d2.Outcome, d2.Reason)
	}
	wantHeldAgain(t, names, again, held.Held)
	equal(t, "quarantine entries", len(heldIDs(t, h1)), 1)
}
