package storetest

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The case of a group's batch that names more keys than the engine's
// window.max_entries: the bound is the group's key table's, which the store
// prunes, never that of the rows one batch reads and writes.

func testSharedBatchPastMaxEntries(t *testing.T, p *place) {
	const maxEntries, fresh, replays = 50, 300, 20
	e, err := engine.New(t.Context(), p.handle(t, "m1").Store,
		engine.Options{Routes: sharedRoutes, TTL: time.Minute, MaxEntries: maxEntries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	count := func(what string, batch []engine.Message, applied int) {
		t.Helper()
		ds, err := e.Process(t.Context(), batch)
		if err != nil {
			t.Fatalf("%s, %d deliveries past max_entries %d: %v", what, len(batch)-maxEntries, maxEntries, err)
		}
		got := map[engine.Outcome]int{}
		for _, d := range ds {
			got[d.Outcome]++
		}
		if got[engine.Applied] != applied || got[engine.Duplicate] != len(batch)-applied {
			t.Fatalf("%s: outcomes %v, want %d applied and %d duplicates", what, got, applied, len(batch)-applied)
		}
	}
	meters := func(from, to int) []engine.Message {
		var out []engine.Message
		for i := from; i < to; i++ {
			out = append(out, meter(i, "0.25"))
		}
		return out
	}
	count("a batch of new keys", meters(0, fresh), fresh)
	count("the batch delivered again, every key stored", meters(0, fresh), 0)
	// The broker's replays of a batch's first messages, in the same batch.
	count("a batch of new keys with replays of its own", append(meters(fresh, 2*fresh), meters(fresh, fresh+replays)...), fresh)
	if kwh := groupField(t, e, "meter/m1", "kwh"); kwh != "150" {
		t.Fatalf("meter/m1 kwh = %s after %d messages of 0.25, want 150", kwh, 2*fresh)
	}
}
