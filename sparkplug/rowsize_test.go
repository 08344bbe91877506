package sparkplug_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestAnEdgeBornAgainWithItsMetricsStoresTheirTableOnce: with
// window.keep_epochs 64 an edge's row keeps the births of up to 65
// sessions, kept and as many retired, and a device's tables of up to 65
// DBIRTHs. An edge that reconnects with the metrics it had, and a device
// that switches between two sets, give the same tables again: the row
// stores each once, so it grows by a birth's few fields, not by a table
// of 100 metrics each time.
func TestAnEdgeBornAgainWithItsMetricsStoresTheirTableOnce(t *testing.T) {
	store := memoryGroup(t)("m1")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e, err := engine.New(context.Background(), store, engine.Options{Routes: []engine.Route{plantRoute},
		Kinds: []engine.RouteKind{sparkplug.RouteKind{}}, KeepEpochs: engine.MaxKeepEpochs, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	apply := func(m sparkplug.Message) {
		t.Helper()
		out, err := e.Process(context.Background(), []engine.Message{{Topic: m.Topic, Payload: m.Payload}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Outcome != engine.Applied {
			t.Fatalf("%s: %s: %s", m.Topic, out[0].Outcome, out[0].Reason)
		}
	}
	rowSize := func() int {
		t.Helper()
		n := 0
		err := store.(engine.RowScanner).ScanSources(context.Background(), func(s engine.SourceState) error {
			row, err := s.MarshalBinary()
			n += len(row)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	apply(edge.Birth(c.next(), hundredMetrics(0)))
	apply(edge.DeviceBirth("d1", c.next(), hundredMetrics(0)))
	apply(edge.DeviceBirth("d1", c.next(), hundredMetrics(100)))
	first := rowSize()
	const sessions, dbirths = 2 * (engine.MaxKeepEpochs + 1), engine.MaxKeepEpochs + 1
	for range sessions {
		edge.NewSession()
		apply(edge.Birth(c.next(), hundredMetrics(0)))
	}
	for i := range dbirths {
		apply(edge.DeviceBirth("d1", c.next(), hundredMetrics(uint64(i%2)*100)))
	}
	const perBirth = 200 // bytes: its epoch, stamps, digests, position, times
	if got, most := rowSize(), first+(sessions+dbirths)*perBirth; got > most {
		t.Fatalf("after %d NBIRTHs and %d DBIRTHs with the tables of the first ones the row is %d bytes (%d after those), over %d",
			sessions, dbirths, got, first, most)
	}
}
