package report_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/report"
)

// TestRedundantFeedsAreNoFailovers: with two broker paths consumed at once
// (mqtt.feeds), each message comes from both, one broker a path: a
// delivery from the other path's broker is no broker change. A failover
// within a path is one.
func TestRedundantFeedsAreNoFailovers(t *testing.T) {
	const siteA, siteA2, siteB = "tcp://site-a-1:1883", "tcp://site-a-2:1883", "tcp://site-b-1:1883"
	f := newFeed(t)
	for s := int64(1); s <= 20; s++ {
		a, b := inc(siteA, "fire", "e7", s, 1), inc(siteB, "fire", "e7", s, 1)
		if s > 10 {
			a.Broker = siteA2 // path a failed over
		}
		a.Feed, b.Feed = "a", "b"
		f.at(time.Duration(s)*time.Second, a, b)
	}
	rep := f.build(t, report.Options{})
	if rep.Totals.Applied != 20 || rep.Totals.Duplicate != 20 {
		t.Fatalf("totals %+v", rep.Totals)
	}
	var failovers []report.BrokerChange
	for _, c := range rep.BrokerChanges {
		if c.From != "" {
			failovers = append(failovers, c)
		}
	}
	if len(rep.BrokerChanges) != 3 || len(failovers) != 1 || failovers[0].From != siteA || failovers[0].To != siteA2 {
		t.Fatalf("%d broker changes, %d failovers %+v; want each path's first broker and path a's one failover", len(rep.BrokerChanges), len(failovers), failovers)
	}
	var b bytes.Buffer
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b.Bytes(), []byte(`<line class="failover"`)); n != 1 {
		t.Fatalf("%d failover lines in the timeline, want 1", n)
	}
}

// TestATwinFromTheOtherPathIsNoReplay: with two broker paths consumed at
// once, every message's copy from the path that came second is a twin,
// decided duplicate by design; the replays a reviewer looks for are those
// a path delivered again itself (its broker failed over to a standby from
// an older snapshot). The report counts the two apart, in the most
// replayed entities and in their lineages.
func TestATwinFromTheOtherPathIsNoReplay(t *testing.T) {
	const siteA, siteB = "tcp://site-a-1:1883", "tcp://site-b-1:1883"
	f := newFeed(t)
	for s := int64(1); s <= 10; s++ {
		a, b := inc(siteA, "fire", "e7", s, 1), inc(siteB, "fire", "e7", s, 1)
		a.Feed, b.Feed = "a", "b"
		f.at(time.Duration(s)*time.Second, a, b)
	}
	for s := int64(4); s <= 6; s++ { // path a's standby replays three
		a := inc(siteA, "fire", "e7", s, 1)
		a.Feed = "a"
		f.at(20*time.Second, a)
	}
	rep := f.build(t, report.Options{})
	if rep.Totals.Applied != 10 || rep.Totals.Duplicate != 13 {
		t.Fatalf("totals %+v", rep.Totals)
	}
	if len(rep.Replayed) != 1 || rep.Replayed[0] != (report.EntityReplays{Entity: "incident/7", Suppressed: 3, Twins: 10}) {
		t.Fatalf("replayed %+v, want incident/7 with 3 replays and 10 twins", rep.Replayed)
	}
	ls, err := report.Lineages(report.Records(context.Background(), f.store, nil), report.LineageOptions{Entities: []string{"incident/7"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Suppressed != 3 || ls[0].Twins != 10 {
		t.Fatalf("lineages %+v, want incident/7's with 3 replays and 10 twins", ls)
	}
	rep.Lineages = ls // as report's command adds them
	var b bytes.Buffer
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 replays suppressed, 10 twins from the other path"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("the page does not say %q", want)
		}
	}
}
