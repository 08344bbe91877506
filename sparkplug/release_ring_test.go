package sparkplug_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// archivedLog is a store whose log holds none of the records a released
// message may have been applied by, as once retention has moved them to
// the archive (a release reads the log the store keeps, never the
// archive): the windows alone decide a release on it.
type archivedLog struct{ *memory.Store }

func (archivedLog) ScanAudit(context.Context, uint64, func(engine.AuditRecord) error) error {
	return nil
}

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

// heldBeforeItsBirth has edge m1 send its NBIRTH and n NDATA after it,
// sent[s] the one at seq s; the first arrives before the birth and is
// held, then the birth is applied. It returns the clock they were stamped
// by, for what is sent after them.
func heldBeforeItsBirth(h *harness, n int) (*clock, []sparkplug.Message) {
	h.t.Helper()
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	birth := edge.Birth(c.next(), meterMetrics)
	sent := make([]sparkplug.Message, n+1)
	for s := 1; s <= n; s++ {
		sent[s] = edge.Data(c.next(), pulse())
	}
	h.expect(engine.Quarantined, sent[1])
	h.expect(engine.Applied, birth)
	return c, sent
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
	_, sent := heldBeforeItsBirth(h, 300)
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
// seq 257 is then applied in its place. (The store's log no longer holds
// the record that applied seq 1, archived: it would prove the release a
// duplicate at 1.)
func TestDataHeldBeforeItsBirthIsNotAppliedAgainInAGapARingAbove(t *testing.T) {
	store := archivedLog{memory.New()}
	h := newHarnessWith(t, store, func(o *engine.Options) { o.MaxEntries = 8 })
	_, sent := heldBeforeItsBirth(h, 300)
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
	if err != nil || r.Outcome != engine.Quarantined || !strings.Contains(r.Reason, "which cannot be told") {
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

// TestAReleasedMessageIsPlacedOnlyWhereTheWindowCanTell covers the
// placements a release walks past or stops at, on a store whose log no
// longer holds the record that applied seq 1 (archived); while it does,
// a release of seq 1's copy is a duplicate the log proves, at 1:
//   - the lowest the window tells about is above sequence_span below the
//     highest: one at the span's edge, which the window would apply
//     whether it saw it or not, is never taken for a seen one (the copy
//     of seq 1 was applied twice there); with the placements above it
//     another message's, the copy is held again;
//   - the highest is another message's, stamped after the released one:
//     with its key gone, the released copy was decided its duplicate and
//     lost;
//   - keys aged out between rings leave a seen placement above a gap:
//     which is its own cannot be told, and it is held again (it was
//     decided a duplicate at the seen one and lost);
//   - below the window (sequence_span 64), a placement whose key the key
//     window holds with the released content is that message again, a
//     duplicate, whatever lies above it (it was applied twice at a
//     placement the window had passed); one whose key is not held tells
//     nothing, and it is held again (it was decided a duplicate at a gap's
//     placement and lost);
//   - a placement below the window that nothing tells of leaves it open
//     even when every one in the window was seen (it was decided a
//     duplicate, its own place never applied: lost) or none was (applied
//     in a gap, its own place applied before: twice).
func TestAReleasedMessageIsPlacedOnlyWhereTheWindowCanTell(t *testing.T) {
	for _, tc := range []struct {
		name       string
		span, keys int
		last       int // the edge's data applied after the birth: seq 2 … last, and seq 1 too when applied
		applied    bool
		other      int   // readings of another edge after it, which push its keys out of the key window
		skip       []int // seqs of the edge never received
		want       engine.Outcome
		seq        int64 // where the release is decided, when not held
		pulses     string
	}{
		{"at the span's edge", 512, 300, 513, true, 0, nil, engine.Quarantined, -1, "513"},
		{"behind the highest alone", 0, 8, 257, false, 20, nil, engine.AppliedLate, 1, "257"},
		{"a seen placement above a gap", 0, 100, 600, false, 0, nil, engine.Quarantined, -1, "599"},
		{"below the window, applied there with its key held", 64, 0, 400, true, 0, nil, engine.Duplicate, 1, "400"},
		{"below the window, a gap above its own place", 64, 0, 5000, false, 0, []int{4865}, engine.Quarantined, -1, "4998"},
		{"below the window, its content below a gap", 64, 0, 400, true, 0, []int{257}, engine.Duplicate, 1, "399"},
		{"every placement in the window seen, its own below it", 512, 8, 600, false, 0, nil, engine.Quarantined, -1, "599"},
		{"every placement in the default window seen, its own below it", 0, 8, 4200, false, 0, nil, engine.Quarantined, -1, "4199"},
		{"every placement in the window a gap, applied below it", 512, 8, 600, true, 0, []int{257, 513}, engine.Quarantined, -1, "598"},
	} {
		// With its log, a store proves a copy of seq 1 applied
		// there: a duplicate at 1. Without (archived), the windows
		// tell what they can.
		for _, archived := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/log archived %v", tc.name, archived), func(t *testing.T) {
				var store engine.Store = memory.New()
				want, seq := tc.want, tc.seq
				if archived {
					store = archivedLog{memory.New()}
				} else if tc.applied {
					want, seq = engine.Duplicate, 1
				}
				h := newHarnessWith(t, store, func(o *engine.Options) {
					if tc.keys > 0 {
						o.MaxEntries = tc.keys
					}
					if tc.span > 0 {
						o.SequenceSpan = tc.span
					}
				})
				c, sent := heldBeforeItsBirth(h, tc.last)
				from := 2
				if tc.applied {
					from = 1
				}
				for s := from; s <= tc.last; s++ {
					if !slices.Contains(tc.skip, s) {
						h.expect(engine.Applied, sent[s])
					}
				}
				other := sparkplug.NewEdge("plant", "m2", 0)
				h.expect(engine.Applied, other.Birth(c.next(), meterMetrics))
				for range tc.other {
					h.expect(engine.Applied, other.Data(c.next(), pulse()))
				}
				ids := heldIDs(t, store)
				if len(ids) != 1 {
					t.Fatalf("held %v: want the copy held before the birth", ids)
				}
				r, err := h.e.Release(t.Context(), ids[0], "op")
				if err != nil || r.Outcome != want || r.Outcome != engine.Quarantined && r.Sequence != seq {
					t.Fatalf("released: %s (%s) at seq %d, %v; want %s at seq %d", r.Outcome, r.Reason, r.Sequence, err, want, seq)
				}
				if got := h.field("meter/m1", "pulses"); got != tc.pulses {
					t.Fatalf("pulses %s, want %s", got, tc.pulses)
				}
			})
		}
	}
}

// TestAReleaseAfterTheSpanWasRaisedIsPlacedWithinTheWindowsOwnSpan: the
// edge's window holds a bitmap of the span it was opened with (256); run
// again with sequence_span 512, it still tells only of that span. A
// placement below it, seen and its key gone, is not taken for one the
// window saw: the window would apply the release there, its rule waived,
// a copy of seq 1 applied a second time.
func TestAReleaseAfterTheSpanWasRaisedIsPlacedWithinTheWindowsOwnSpan(t *testing.T) {
	store := memory.New()
	h := newHarnessWith(t, store, func(o *engine.Options) { o.SequenceSpan = 256; o.MaxEntries = 100 })
	_, sent := heldBeforeItsBirth(h, 300)
	for s := 1; s <= 300; s++ {
		if s != 290 { // a gap: the window keeps its bitmap
			h.expect(engine.Applied, sent[s])
		}
	}
	h.e.Close()
	wider := newHarnessWith(t, store, func(o *engine.Options) { o.SequenceSpan = 512; o.MaxEntries = 100 })
	ids := heldIDs(t, store)
	if len(ids) != 1 {
		t.Fatalf("held %v", ids)
	}
	r, err := wider.e.Release(t.Context(), ids[0], "op")
	if err != nil || r.Outcome.Effective() {
		t.Fatalf("released: %s (%s) at seq %d, %v; a copy of seq 1 applied a second time", r.Outcome, r.Reason, r.Sequence, err)
	}
	if got := wider.field("meter/m1", "pulses"); got != "299" {
		t.Fatalf("pulses %s, want 299", got)
	}
}
