package report_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/report"
)

// TestABrokerRestartAtTheSameURLIsAReconnect: the broker restarts at the
// same URL (or the link drops, or replayguard restarts), the consumer
// connects again, and the first delivery of the new connection records
// when it came up. The report lists the new connection among its
// reconnects, in a table of its own and on the timeline, and leaves the
// broker changes to changes of broker; further deliveries on it are none.
func TestABrokerRestartAtTheSameURLIsAReconnect(t *testing.T) {
	const url = "tcp://broker:1883"
	f := newFeed(t)
	var positions []uint64
	for s := int64(1); s <= 20; s++ {
		m := inc(url, "fire", "e7", s, 1)
		if s == 1 || s == 11 { // each connection's first delivery
			m.Connected = start.Add(time.Duration(s)*time.Second - 500*time.Millisecond)
		}
		positions = append(positions, f.at(time.Duration(s)*time.Second, m)[0].Position)
	}
	rep := f.build(t, report.Options{})
	bc, rc := rep.BrokerChanges, rep.Reconnects
	if len(bc) != 1 || bc[0].From != "" || bc[0].To != url || bc[0].Reconnect {
		t.Fatalf("broker changes %+v; want the first broker only", bc)
	}
	if len(rc) != 1 {
		t.Fatalf("reconnects %+v; want the new connection to the broker", rc)
	}
	want := report.BrokerChange{Time: start.Add(11 * time.Second), Position: positions[10], From: url, To: url,
		Reconnect: true, Connected: start.Add(10500 * time.Millisecond)}
	if got := rc[0]; !got.Time.Equal(want.Time) || !got.Connected.Equal(want.Connected) || got.Position != want.Position ||
		got.From != want.From || got.To != want.To || !got.Reconnect {
		t.Fatalf("the reconnect: %+v, want %+v", got, want)
	}
	var b bytes.Buffer
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b.Bytes(), []byte(`<line class="failover"`)); n != 1 {
		t.Fatalf("%d failover lines in the timeline, want 1 (the reconnect)", n)
	}
	if !bytes.Contains(b.Bytes(), []byte(`<table id="reconnects">`)) || !bytes.Contains(b.Bytes(), []byte("New connections to the same broker")) {
		t.Fatalf("the report does not show the reconnect")
	}
}
