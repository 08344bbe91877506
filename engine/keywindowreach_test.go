package engine_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestStatsSayHowFarBackTheKeyWindowReaches: once the window holds
// max_entries, keys leave it by count, well before their ttl; Stats say
// when the oldest key left was applied, and an id route's replay of a
// message applied before it is applied again.
func TestStatsSayHowFarBackTheKeyWindowReaches(t *testing.T) {
	clock := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	el := time.Duration(0)
	e, err := engine.New(t.Context(), memory.New(), engine.Options{Routes: []engine.Route{meterRoute}, MaxEntries: 2,
		Now: func() time.Time { return clock }, Elapsed: func() time.Duration { return el }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if st := e.Stats(); st.Keys != 0 || st.MaxKeys != 2 || st.OldestKey != 0 {
		t.Fatalf("stats of an empty window: %+v", st)
	}
	first := meter("m1", "r1", "1")
	for i, m := range []engine.Message{first, meter("m1", "r2", "1"), meter("m1", "r3", "1")} {
		if _, err := e.Process(t.Context(), []engine.Message{m}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			clock, el = clock.Add(time.Minute), el+time.Minute
		}
	}
	second := time.Date(2026, 12, 5, 12, 1, 0, 0, time.UTC)
	if st := e.Stats(); st.Keys != 2 || st.OldestKey != second.UnixNano() {
		t.Fatalf("stats after three keys in a window of two: %+v, want the oldest applied at %s", st, second)
	}
	ds, err := e.Process(t.Context(), []engine.Message{first})
	if err != nil || ds[0].Outcome != engine.Applied {
		t.Fatalf("a replay of the key the count evicted: %+v %v, want applied (what the stats warn of)", ds, err)
	}
}
