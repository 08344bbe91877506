package report_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// TestAGapFilledByAnotherMemberIsClosed: on a shared store, member a opens
// a gap and member b, whose clock runs 20 ms behind a's, fills it a moment
// later. Merged by time, b's fills come before a's gap: the gap is still
// closed.
func TestAGapFilledByAnotherMemberIsClosed(t *testing.T) {
	opened := rec(20, "applied", primary, 5)
	opened.Gap = &engine.Range{From: 2, To: 4}
	fill := func(seq int64) engine.AuditRecord {
		r := rec(20, "applied_late", primary, seq)
		r.Time = r.Time.Add(time.Duration(seq-20) * time.Millisecond) // b's clock: 20 ms behind, the fills 1 ms apart
		return r
	}
	g := group{
		"a": chain(t, "a", rec(10, "applied", primary, 1), opened),
		"b": chain(t, "b", fill(2), fill(3), fill(4)),
	}
	recs, heads, err := report.Chains(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(recs, report.Options{Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 1 {
		t.Fatalf("sources %+v", rep.Sources)
	}
	if s := rep.Sources[0]; s.GapsOpened != 1 || s.MissingSequences != 3 || s.AppliedLate != 3 || s.GapsClosed != 1 {
		t.Fatalf("fire/e7: gaps opened %d, missing %d, applied late %d, closed %d; want 1, 3, 3, 1", s.GapsOpened, s.MissingSequences, s.AppliedLate, s.GapsClosed)
	}
}
