package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// With two feeds, a message's twin from the other feed is a duplicate, a
// message one feed lost is applied from the other (late where its
// successors came first), each record names the feed that delivered it,
// and a source names the feed of its last message applied.
func TestTwinsFromTwoFeeds(t *testing.T) {
	h := newHarness(t, engine.Options{})
	from := func(feed string, m engine.Message) engine.Message { m.Feed = feed; return m }
	m := func(seq int) engine.Message {
		return inc("fd", "e1", 1, seq, `"incident_id":"7","casualty_delta":1`)
	}
	got := h.outcomes(from("a", m(1)), from("b", m(1)), from("a", m(3)), from("b", m(2)), from("b", m(3)), from("a", m(2)))
	if want := "applied duplicate applied applied_late duplicate duplicate"; got != want {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	var feeds []string
	if err := h.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		feeds = append(feeds, r.Feed)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(feeds, " "); got != "a b a b b a" {
		t.Fatalf("feeds %q", got)
	}
	reps := h.e.Sources()
	if len(reps) != 1 || reps[0].Feed != "b" || len(reps[0].Gaps) != 0 || reps[0].High != 3 {
		t.Fatalf("sources %+v; want feed b (its late fill was the last applied), no gap", reps)
	}
	if s := h.state(); s != `{"incident/7":{"casualties":3}}` {
		t.Fatalf("state %s", s)
	}
}

// A held message keeps the feed that delivered it: its entry, and the
// record of its release, name it.
func TestAHeldMessageKeepsItsFeed(t *testing.T) {
	h := newHarness(t, engine.Options{})
	first, other := meter("m1", "r1", "0.25"), meter("m1", "r1", "0.5")
	first.Feed, other.Feed = "a", "b"
	ds := h.feed(first, other)
	if ds[1].Outcome != engine.Conflict {
		t.Fatalf("the other reading: %s", ds[1].Outcome)
	}
	q, err := h.store.Quarantined(context.Background(), ds[1].Position)
	if err != nil || q.Feed != "b" {
		t.Fatalf("entry %+v, %v; want feed b", q, err)
	}
	rel, err := h.e.Release(context.Background(), ds[1].Position, "j.doe")
	if err != nil {
		t.Fatal(err)
	}
	var feed string
	h.store.ScanAudit(context.Background(), rel.Position, func(r engine.AuditRecord) error { feed = r.Feed; return nil })
	if feed != "b" {
		t.Fatalf("the release's record names feed %q, want b", feed)
	}
}
