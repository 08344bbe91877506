package web

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// TestRatesAfterTheClockStepsBack: NTP steps the clock back an hour. The
// decisions made after the step are counted in the chart's window, as
// those before it were, not dropped as older than the history.
func TestRatesAfterTheClockStepsBack(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := NewHub()
	clock := t0
	h.now = func() time.Time { return clock }
	for i := range rateSpan { // fifteen minutes of decisions, one a second
		h.Committed([]engine.AuditRecord{record(uint64(i+1), "applied", t0.Add(time.Duration(i-rateSpan)*time.Second))}, nil)
	}
	clock = t0.Add(-time.Hour)
	for i := range 10 { // the replay burst of a failover, just after the step
		h.Committed([]engine.AuditRecord{record(uint64(rateSpan+1+i), "duplicate", clock)}, nil)
	}
	clock = clock.Add(time.Second)
	r := h.Rates(time.Minute)
	if got := sum(r.Counts["duplicate"]); got != 10 {
		t.Fatalf("duplicates in the last minute after the clock stepped back: %d, want 10", got)
	}
	if got := sum(r.Counts["applied"]); got != 0 {
		t.Fatalf("applied in the last minute: %d, want 0", got)
	}
}
