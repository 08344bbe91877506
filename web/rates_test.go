package web

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// record is a delivery decided at t.
func record(pos uint64, outcome string, t time.Time) engine.AuditRecord {
	return engine.AuditRecord{Position: pos, Outcome: outcome, Time: t}
}

func sum(xs []uint64) uint64 {
	n := uint64(0)
	for _, x := range xs {
		n += x
	}
	return n
}

func TestRatesCountEachDecisionInItsSecond(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := NewHub()
	h.now = func() time.Time { return t0.Add(9*time.Second + 300*time.Millisecond) }
	h.Committed([]engine.AuditRecord{
		record(1, "applied", t0),
		record(2, "applied", t0.Add(999*time.Millisecond)),
		record(3, "duplicate", t0.Add(5*time.Second)),
		record(4, "duplicate", t0.Add(5*time.Second+10*time.Millisecond)),
		record(5, "duplicate", t0.Add(5*time.Second+20*time.Millisecond)),
		record(6, "applied_late", t0.Add(9*time.Second)),
		{Position: 7, Outcome: "applied", Ref: 3, Time: t0.Add(9 * time.Second)}, // a release: not a delivery
		{Position: 8, Outcome: "discarded", Ref: 4, Time: t0.Add(9 * time.Second)},
	}, nil)

	r := h.Rates(10 * time.Second)
	if !r.Start.Equal(t0) || r.StepSeconds != 1 || r.Position != 8 {
		t.Fatalf("start %v, step %d, position %d; want %v, 1, 8", r.Start, r.StepSeconds, r.Position, t0)
	}
	want := map[string][]uint64{
		"applied":      {2, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"duplicate":    {0, 0, 0, 0, 0, 3, 0, 0, 0, 0},
		"applied_late": {0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		"conflict":     make([]uint64, 10), "quarantined": make([]uint64, 10), "malformed": make([]uint64, 10),
	}
	if len(r.Counts) != len(want) {
		t.Fatalf("series %v, want one per delivery outcome", r.Counts)
	}
	for o, w := range want {
		if fmt.Sprint(r.Counts[o]) != fmt.Sprint(w) {
			t.Errorf("%s: %v, want %v", o, r.Counts[o], w)
		}
	}

	t.Run("a shorter window holds the latest seconds", func(t *testing.T) {
		r := h.Rates(5 * time.Second)
		if !r.Start.Equal(t0.Add(5*time.Second)) || fmt.Sprint(r.Counts["duplicate"]) != "[3 0 0 0 0]" {
			t.Fatalf("start %v, duplicate %v", r.Start, r.Counts["duplicate"])
		}
	})
	t.Run("a part of a second rounds up and a huge window is capped at the history kept", func(t *testing.T) {
		if n := len(h.Rates(1500 * time.Millisecond).Counts["applied"]); n != 2 {
			t.Fatalf("%d buckets for 1.5s, want 2", n)
		}
		if n := len(h.Rates(time.Hour).Counts["applied"]); n != rateSpan {
			t.Fatalf("%d buckets for 1h, want %d", n, rateSpan)
		}
	})
}

func TestRatesForgetSecondsOlderThanTheHistory(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := NewHub()
	clock := t0
	h.now = func() time.Time { return clock }
	h.Committed([]engine.AuditRecord{record(1, "applied", t0), record(2, "applied", t0)}, nil)

	// rateSpan seconds later the bucket of t0 is reused: t0 is gone, the
	// new second counts from zero and a late record for t0 is not counted.
	later := t0.Add(rateSpan * time.Second)
	clock = later
	h.Committed([]engine.AuditRecord{record(3, "duplicate", later), record(4, "applied", t0)}, nil)
	r := h.Rates(rateSpan * time.Second)
	if got := sum(r.Counts["applied"]); got != 0 {
		t.Fatalf("applied %d in the window, want 0: t0 is older than the history", got)
	}
	if d := r.Counts["duplicate"]; d[len(d)-1] != 1 || sum(d) != 1 {
		t.Fatalf("duplicate %v, want 1 in the last second", d)
	}
	if c := h.Counts().Decisions["applied"]; c != 3 {
		t.Fatalf("applied %d in all, want 3: the history bounds the chart, not the counts", c)
	}

	// A second of the window with no decision is 0, even when its bucket
	// holds a second that the window does not cover.
	clock = later.Add(2 * time.Second)
	if d := h.Rates(2 * time.Second).Counts["duplicate"]; fmt.Sprint(d) != "[0 0]" {
		t.Fatalf("duplicate %v two seconds on, want [0 0]", d)
	}
}

func TestRatesUnderConcurrentCommitsAndReads(t *testing.T) {
	h := NewHub()
	now := time.Now()
	h.now = func() time.Time { return now }
	const writers, commits, per = 4, 200, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := make([]engine.AuditRecord, per)
			for c := range commits {
				for i := range recs {
					// spread over the last 60 seconds, all in the window
					recs[i] = record(uint64(w*commits*per+c*per+i+1), engine.Outcomes()[i%6].String(),
						now.Add(-time.Duration((c+i)%60)*time.Second))
				}
				h.Committed(recs, nil)
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				r := h.Rates(time.Minute)
				if len(r.Counts["applied"]) != 60 {
					t.Errorf("%d buckets for a minute", len(r.Counts["applied"]))
					return
				}
			}
		}()
	}
	wg.Wait()
	r := h.Rates(time.Minute)
	total := uint64(0)
	for _, c := range r.Counts {
		total += sum(c)
	}
	if total != writers*commits*per || r.Position != writers*commits*per {
		t.Fatalf("%d decisions in the window, position %d; want %d", total, r.Position, writers*commits*per)
	}
}

func TestRatesEndpoint(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(incident(1, "7", 1, "enroute"), incident(2, "7", 0, "on_scene"), incident(2, "7", 0, "on_scene"),
		meter("m3-1", "0.25"), meter("m3-1", "0.25"))
	var r Rates
	f.get("/api/v1/rates?window=15m").want(t, 200, &r)
	if n := len(r.Counts["applied"]); n != 900 || sum(r.Counts["applied"]) != 3 || sum(r.Counts["duplicate"]) != 2 {
		t.Fatalf("%d buckets, applied %d, duplicate %d; want 900, 3, 2", n, sum(r.Counts["applied"]), sum(r.Counts["duplicate"]))
	}
	if r.Position != 5 || r.Now.Sub(r.Start) < 899*time.Second || r.Now.Sub(r.Start) >= 900*time.Second {
		t.Fatalf("position %d, start %v, now %v", r.Position, r.Start, r.Now)
	}
	f.get("/api/v1/rates").want(t, 200, &r)
	if len(r.Counts["applied"]) != 300 {
		t.Fatalf("%d buckets by default, want 300 (5m)", len(r.Counts["applied"]))
	}
	for _, bad := range []string{"0s", "-1m", "16m", "1500ms", "five", "5"} {
		f.get("/api/v1/rates?window="+bad).want(t, 400, nil)
	}
	f.post("/api/v1/rates", "{}").want(t, 405, nil)

	noHub := New(Config{}, Deps{Engine: f.eng})
	rec := httptest.NewRecorder()
	noHub.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9780/api/v1/rates", nil))
	if rec.Code != 404 {
		t.Fatalf("without a hub: %d, want 404", rec.Code)
	}
}
