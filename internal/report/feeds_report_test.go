package report_test

import (
	"bytes"
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
