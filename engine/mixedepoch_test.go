package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestAnIntegerEpochAfterAStringOneIsNewOnlyAboveItsRank: a producer that
// names its boots by integers, then by a string, then by integers again.
// The string epoch ranks one above the integer before it; an integer epoch
// at or below that rank cannot be shown newer than the string one, and a
// window that applied it as new had its `set` writes lose to the string
// epoch's (status "C" recorded lost, "B" standing): it is held as an old
// epoch, and the next integer above the rank is new and its write stands.
func TestAnIntegerEpochAfterAStringOneIsNewOnlyAboveItsRank(t *testing.T) {
	h := newHarness(t, engine.Options{})
	unit := func(boot any, seq int, status string) engine.Message {
		return inc("fd", "e1", boot, seq, `"unit_id":"UA","unit_status":"`+status+`"`)
	}
	steps := []struct {
		msg          engine.Message
		want, status string
	}{
		{unit(1, 5, "A"), "applied", "A"},
		{unit("s", 1, "B"), "applied", "B"},
		{unit(2, 0, "C"), "quarantined", "B"},
		{unit(2, 1, "C"), "quarantined", "B"},
		{unit(3, 0, "D"), "applied", "D"},
		{unit("t", 0, "E"), "applied", "E"},
		{unit(4, 0, "F"), "quarantined", "E"},
		{unit(5, 0, "G"), "applied", "G"},
	}
	for i, s := range steps {
		ds := h.feed(s.msg)
		if got := ds[0].Outcome.String(); got != s.want {
			t.Fatalf("step %d (%s): %s (%s), want %s", i, s.msg.Payload, got, ds[0].Reason, s.want)
		}
		if want := `"status":"` + s.status + `"`; !strings.Contains(h.state(), want) {
			t.Fatalf("step %d (%s): state %s, want %s", i, s.msg.Payload, h.state(), want)
		}
	}
	err := h.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		for _, c := range r.Effects {
			if c.Lost {
				t.Errorf("position %d (%s): the set of an applied message is recorded lost", r.Position, r.Outcome)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
