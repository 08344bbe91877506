package engine_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

func gapsOf(t *testing.T, h *harness) []engine.Range {
	t.Helper()
	rs := h.e.Sources()
	if len(rs) != 1 {
		t.Fatalf("%d sources", len(rs))
	}
	return rs[0].Gaps
}

// Members of a group commit every other sequence of a source in turn: for
// a moment hundreds of gaps are open, more than a source lists, and each is
// filled by the next member's batch. A real loss among them is still
// reported once the others are filled, inside the window and after the
// window has moved past it.
func TestInterleavedGapsAreReportedExactly(t *testing.T) {
	h := newHarness(t, engine.Options{SequenceSpan: 1024})
	var evens, odds []engine.Message
	for s := 0; s < 600; s += 2 {
		evens = append(evens, inc("fd", "e1", 1, s, ""))
		if s+1 != 301 { // lost by the broker
			odds = append(odds, inc("fd", "e1", 1, s+1, ""))
		}
	}
	h.feed(evens...)
	if got := gapsOf(t, h); len(got) != 299 || got[0] != (engine.Range{From: 1, To: 1}) || got[298] != (engine.Range{From: 597, To: 597}) {
		t.Fatalf("after the even sequences: %d gaps, first %v", len(got), got[:min(3, len(got))])
	}
	h.feed(odds...)
	if got, want := gapsOf(t, h), []engine.Range{{From: 301, To: 301}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the odd ones: gaps %v, want %v", got, want)
	}
	h.feed(inc("fd", "e1", 1, 2000, "")) // the window (1024) moves past 301
	want := []engine.Range{{From: 301, To: 301}, {From: 600, To: 1999}}
	if got := gapsOf(t, h); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the window moved on: gaps %v, want %v", got, want)
	}
	if ds := h.feed(inc("fd", "e1", 1, 1500, "")); ds[0].Outcome != engine.AppliedLate {
		t.Fatalf("a late sequence inside the window: %v", ds[0].Outcome)
	}
	want = []engine.Range{{From: 301, To: 301}, {From: 600, To: 1499}, {From: 1501, To: 1999}}
	if got := gapsOf(t, h); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a late fill: gaps %v, want %v", got, want)
	}
	if ds := h.feed(inc("fd", "e1", 1, 301, "")); ds[0].Outcome != engine.Quarantined {
		t.Fatalf("the lost sequence, far below the window now: %v", ds[0].Outcome)
	}
}

// Stores written before the bitmap held a window's gaps list them: they
// are reported once, and a late message fills them.
func TestListedGapsInsideTheWindowFromAnOlderStore(t *testing.T) {
	w := engine.EpochWindow{Epoch: "1", Numeric: true, Value: 1, High: 10, First: 0,
		Bitmap: make([]uint64, 1), Gaps: []engine.Range{{From: 3, To: 4}}}
	for s := 0; s <= 10; s++ {
		if s != 3 && s != 4 && s != 7 {
			w.Bitmap[0] |= 1 << s
		}
	}
	want := []engine.Range{{From: 3, To: 4}, {From: 7, To: 7}}
	if got := w.OpenGaps(); !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenGaps = %v, want %v", got, want)
	}
}

func TestAListedGapLeavingTheWindowIsListedOnce(t *testing.T) {
	h := newHarness(t, engine.Options{SequenceSpan: 64})
	h.feed(inc("fd", "e1", 1, 0, ""), inc("fd", "e1", 1, 5, ""), inc("fd", "e1", 1, 200, ""))
	want := []engine.Range{{From: 1, To: 4}, {From: 6, To: 199}}
	if got := gapsOf(t, h); !reflect.DeepEqual(got, want) {
		t.Fatalf("gaps %v, want %v", got, want)
	}
}

// TestNoSourceIsAnEmptyListNotNull: an engine with no source window reports
// an empty list, which JSON writes as [], as it always did.
func TestNoSourceIsAnEmptyListNotNull(t *testing.T) {
	e, err := engine.New(t.Context(), memory.New(), engine.Options{Routes: []engine.Route{incidentRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if b, _ := json.Marshal(e.Sources()); string(b) != "[]" {
		t.Fatalf("Sources() of an engine without sources marshals to %s, want []", b)
	}
}
