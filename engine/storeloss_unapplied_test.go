package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestADuplicateDecidedAgainFromTheJournalIsNotApplied: a lost batch that
// found a delivery duplicate (its first copy applied earlier, in a commit
// the store kept) is younger than window.ttl, so it is decided again; but
// the first copy's key is older than the batch and has left the window by
// then. The delivery, not applied when first decided, is held, not applied
// a second time.
func TestADuplicateDecidedAgainFromTheJournalIsNotApplied(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) // after the wall clock: the memory group prunes by it
	g, m, e := journaledMeters(t, time.Hour, func() time.Time { return now })
	reading := []engine.Message{{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":0.25}`)}}
	if out, err := e.Process(ctx, reading); err != nil || out[0].Outcome != engine.Applied {
		t.Fatal(out, err)
	}
	replica := g.Checkpoint() // the replica has the first copy
	now = now.Add(50 * time.Minute)
	if out, err := e.Process(ctx, reading); err != nil || out[0].Outcome != engine.Duplicate { // the broker redelivers it
		t.Fatal(out, err)
	}
	g.FailOver(replica) // the duplicate's record is lost
	now = now.Add(20 * time.Minute)
	if err := e.CheckStore(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := e.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == "meter/m1" && s.Fields.Get("kwh").Num != "0.25" {
			t.Fatalf("meter/m1 kwh = %s after the recovery, want 0.25: reading r-1 was applied twice", s.Fields.Get("kwh").Num)
		}
	}
	held := 0
	m.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
		if string(q.Payload) == `{"msgId":"r-1","kwh":0.25}` {
			held++
		}
		return nil
	})
	if held != 1 {
		t.Fatalf("%d quarantine entries of reading r-1, want 1: what cannot be proven a duplicate is held", held)
	}
}

// journaledMeters is member m1 of a new memory group, and an engine on it
// deciding the meters route with a journal of the given retention, a key
// window of an hour and clock as its time; all closed at cleanup.
func journaledMeters(t *testing.T, retention time.Duration, clock func() time.Time) (*memory.Group, engine.Store, *engine.Engine) {
	t.Helper()
	g := memory.NewGroup(0, 0)
	m, e := journaledMember(t, g, "m1", retention, clock)
	return g, m, e
}
