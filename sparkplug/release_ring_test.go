package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// heldIDs returns the ids of the quarantine's open entries.
func heldIDs(t *testing.T, store engine.Store) []uint64 {
	t.Helper()
	var ids []uint64
	if err := store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		ids = append(ids, q.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestDataHeldBeforeItsBirthAndReleasedARingLaterIsAppliedInItsOwnPlace:
// an edge's first NDATA (seq 1) arrives before its NBIRTH and is held;
// the edge then sends 299 more. Released, its nearest placement behind
// the highest (300) is 257, whose key the key window holds with other
// content: another message's. Its own place, a ring lower, was never
// seen: it is applied there, late, and the edge's pulses count every
// message once. It was decided a duplicate at 257 and lost.
func TestDataHeldBeforeItsBirthAndReleasedARingLaterIsAppliedInItsOwnPlace(t *testing.T) {
	store := memory.New()
	h := newHarnessWith(t, store, nil)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	birth := edge.Birth(c.next(), meterMetrics)
	sent := make([]sparkplug.Message, 301) // sent[s]: the NDATA at seq s, 1 … 300
	for s := 1; s <= 300; s++ {
		sent[s] = edge.Data(c.next(), pulse())
	}
	h.expect(engine.Quarantined, sent[1])
	h.expect(engine.Applied, birth)
	h.expect(engine.Applied, sent[2:]...)
	ids := heldIDs(t, store)
	if len(ids) != 1 {
		t.Fatalf("held %v: want the first NDATA", ids)
	}
	r, err := h.e.Release(t.Context(), ids[0], "op")
	if err != nil || r.Outcome != engine.AppliedLate || r.Sequence != 1 {
		t.Fatalf("released: %s (%s) at seq %d, %v; want applied_late at seq 1", r.Outcome, r.Reason, r.Sequence, err)
	}
	h.expect(engine.Duplicate, sent[1], sent[257])
	if got := h.field("meter/m1", "pulses"); got != "300" {
		t.Fatalf("pulses %s, want 300: one a message", got)
	}
}

// TestDataHeldBeforeItsBirthIsNotAppliedAgainInAGapARingAbove: a copy of
// an edge's first NDATA (seq 1) is held before the NBIRTH, another copy
// is applied after it, and the key window (max_entries 8) has dropped
// its key by the release, when the highest is 300 and 257 was never
// received. The nearest placement behind the highest is that gap, yet 1
// below it was seen and may be this very message: the release holds it
// again, rather than apply it twice and fill 257's gap with it. The real
// seq 257 is then applied in its place.
func TestDataHeldBeforeItsBirthIsNotAppliedAgainInAGapARingAbove(t *testing.T) {
	store := memory.New()
	h := newHarnessWith(t, store, func(o *engine.Options) { o.MaxEntries = 8 })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	birth := edge.Birth(c.next(), meterMetrics)
	sent := make([]sparkplug.Message, 301)
	for s := 1; s <= 300; s++ {
		sent[s] = edge.Data(c.next(), pulse())
	}
	h.expect(engine.Quarantined, sent[1])
	h.expect(engine.Applied, birth)
	for s := 1; s <= 300; s++ {
		if s != 257 {
			h.expect(engine.Applied, sent[s])
		}
	}
	ids := heldIDs(t, store)
	if len(ids) != 1 {
		t.Fatalf("held %v: want the copy held before the birth", ids)
	}
	r, err := h.e.Release(t.Context(), ids[0], "op")
	if err != nil || r.Outcome != engine.Quarantined || !strings.Contains(r.Reason, "may be this very message") {
		t.Fatalf("released: %s (%s) at seq %d, %v; want held again", r.Outcome, r.Reason, r.Sequence, err)
	}
	if got := h.field("meter/m1", "pulses"); got != "299" {
		t.Fatalf("pulses %s after the release, want 299", got)
	}
	d := h.expect(engine.AppliedLate, sent[257])
	if d[0].Sequence != 257 {
		t.Fatalf("seq 257 placed at %d", d[0].Sequence)
	}
	if got := h.field("meter/m1", "pulses"); got != "300" {
		t.Fatalf("pulses %s, want 300: one a message", got)
	}
}
