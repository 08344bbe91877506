package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// A set of a Sparkplug metric's historical values alone left the field as
// it was: explain's line for it says so, beside the value it did not set.
func TestExplainSaysAHistoricalValueWasNotSet(t *testing.T) {
	l := &report.Lineage{Entity: "meter/m1", Changes: []report.Change{{
		Decision: report.Decision{Position: 3, Time: time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC), Outcome: "applied",
			Reason: "set temp: a historical value of metrics.Temperature not set, none current: the field is left as it was"},
		Route: "plant", Topic: "spBv1.0/plant/NDATA/m1",
		Effects: []engine.Change{{Entity: "meter/m1", Field: "temp", Op: "set", Value: json.RawMessage("18"),
			After: json.RawMessage("25"), Historical: true}},
	}}}
	var text bytes.Buffer
	if err := WriteLineage(&text, l); err != nil {
		t.Fatal(err)
	}
	want := "temp set 18 -> 25  (historical, not the current value: the field stays)"
	if !strings.Contains(text.String(), want) || !strings.Contains(text.String(), "none current: the field is left as it was") {
		t.Fatalf("explain:\n%s\nwant a line %q and the reason", text.String(), want)
	}
}
