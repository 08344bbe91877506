package sparkplug_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAReleasedCopyOfDataWhoseKeyLeftTheKeyWindowIsHeldAgain:
// an edge's NDATA at seq 456 (raw 200) is applied, and its key then
// leaves the key window (max_entries 8) while the session's window still
// holds 456; seq 200, a ring below, was never seen. A copy of that NDATA,
// delivered while the session's highest was 210 (its nearest placement
// 200, yet stamped after the highest: held, waiting for the NBIRTH of its
// birth), is released once the highest is 470: its nearest placement is
// 456, which the window saw and whose key is gone: it may be this very
// message, applied once, or seq 200 a ring lower, never received. Which
// the windows cannot tell: with the record that applied 456 moved to the
// archive, it is held again, never applied a second time at 200 nor
// decided a duplicate and lost. While the log the store keeps holds that
// record (a group's store too), the log proves it that very message: a
// duplicate at 456. The edge's pulses stay one a message.
func TestAReleasedCopyOfDataWhoseKeyLeftTheKeyWindowIsHeldAgain(t *testing.T) {
	member := func(t *testing.T) engine.Store {
		m, err := memory.NewGroup(0, 8).Open("m1") // the group's key window holds 8 keys, as MaxEntries here
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		store    func(*testing.T) engine.Store
		archived bool
	}{
		{"log archived", func(*testing.T) engine.Store { return archivedLog{memory.New()} }, true},
		{"log kept", func(*testing.T) engine.Store { return memory.New() }, false},
		{"log kept by a group's store", member, false},
	} {
		t.Run(tc.name, func(t *testing.T) { releaseCopyWhoseKeyLeft(t, tc.store(t), tc.archived) })
	}
}

// releaseCopyWhoseKeyLeft is TestAReleasedCopyOfDataWhoseKeyLeftTheKeyWindowIsHeldAgain
// on store, whose log still holds the record that applied seq 456 (the
// release is a duplicate the log proves, at 456), or not (archived).
func releaseCopyWhoseKeyLeft(t *testing.T, store engine.Store, archived bool) {
	h := newHarnessWith(t, store, func(o *engine.Options) { o.MaxEntries = 8 })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	sent := make([]sparkplug.Message, 471) // sent[s]: the NDATA at unwrapped seq s, 1 … 470
	for s := 1; s <= 470; s++ {
		sent[s] = edge.Data(c.next(), pulse())
	}
	for s := 1; s <= 210; s++ {
		if s != 200 { // seq 200 is lost
			h.expect(engine.Applied, sent[s])
		}
	}
	d := h.expect(engine.Quarantined, sent[456])
	if !strings.Contains(d[0].Reason, "it waits for the NBIRTH of its birth") {
		t.Fatalf("seq 456 (raw 200) with the highest at 210: reason %q", d[0].Reason)
	}
	var appliedAt uint64 // the audit position that applied seq 456
	for s := 211; s <= 470; s++ {
		if d := h.expect(engine.Applied, sent[s]); s == 456 {
			appliedAt = d[0].Position
		}
	}
	if got := h.field("meter/m1", "pulses"); got != "469" {
		t.Fatalf("pulses %s, want 469", got)
	}
	var ids []uint64
	if err := store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		ids = append(ids, q.ID)
		return nil
	}); err != nil || len(ids) != 1 {
		t.Fatalf("held %v, %v: want the one copy", ids, err)
	}
	r, err := h.e.Release(t.Context(), ids[0], "op")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case archived && (r.Outcome != engine.Quarantined || !strings.Contains(r.Reason, "which cannot be told")):
		t.Fatalf("released: %s (%s) at seq %d, want held again", r.Outcome, r.Reason, r.Sequence)
	case !archived && (r.Outcome != engine.Duplicate || r.Sequence != 456 ||
		!regexp.MustCompile(fmt.Sprintf(`the audit log records its key applied with the same content at audit position %d(,| of member m1,)`, appliedAt)).MatchString(r.Reason)):
		t.Fatalf("released: %s (%s) at seq %d, want a duplicate at 456 naming audit position %d", r.Outcome, r.Reason, r.Sequence, appliedAt)
	}
	if got := h.field("meter/m1", "pulses"); got != "469" {
		t.Fatalf("pulses %s after the release, want 469", got)
	}
}

// TestAReleasedCopyIsNotAppliedARingBelowWhatTheWindowSaw: an edge's NDATA
// at seq 300 (raw 44) is applied, seq 44 never is. A copy of seq 300,
// delivered when the highest is 440, is held (more than half the ring
// behind by its timestamp); by its release the highest is 560, so its
// nearest placement is 556, whose key the key window holds with other
// content, while 300's key is gone (max_entries 8). An operator's release
// is placed where its timestamp puts it, 556, and decided there: a ring
// lower, 300, the window saw, and may be this very message; the free 44
// below it would apply it twice. It is never applied: the edge's pulses
// stay one a message.
func TestAReleasedCopyIsNotAppliedARingBelowWhatTheWindowSaw(t *testing.T) {
	store := memory.New()
	h := newHarnessWith(t, store, func(o *engine.Options) { o.MaxEntries = 8 })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	sent := make([]sparkplug.Message, 561) // sent[s]: the NDATA at unwrapped seq s, 1 … 560
	for s := 1; s <= 560; s++ {
		sent[s] = edge.Data(c.next(), pulse())
	}
	for s := 1; s <= 440; s++ {
		if s != 44 { // seq 44 is lost
			h.expect(engine.Applied, sent[s])
		}
	}
	h.expect(engine.Quarantined, sent[300])
	for s := 441; s <= 560; s++ {
		h.expect(engine.Applied, sent[s])
	}
	if got := h.field("meter/m1", "pulses"); got != "559" {
		t.Fatalf("pulses %s, want 559", got)
	}
	var ids []uint64
	if err := store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		ids = append(ids, q.ID)
		return nil
	}); err != nil || len(ids) != 1 {
		t.Fatalf("held %v, %v: want the one copy", ids, err)
	}
	r, err := h.e.Release(t.Context(), ids[0], "op")
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome.Effective() {
		t.Fatalf("released: %s (%s) at seq %d, want it not applied", r.Outcome, r.Reason, r.Sequence)
	}
	if got := h.field("meter/m1", "pulses"); got != "559" {
		t.Fatalf("pulses %s after the release, want 559", got)
	}
}
