package report_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAReleaseHeldAgainIsNotReportedReleased: a Sparkplug NDATA decided
// before its edge's NBIRTH is held; released while the birth is still
// unknown it is held again under a new entry, and released once the birth
// is decided it is applied. The report counts one release and one held
// again, and names the entry that held the message again.
func TestAReleaseHeldAgainIsNotReportedReleased(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	plant := engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}", Add: map[string]string{"pulses": "metrics.Pulses"}}}}
	clock := start
	e, err := engine.New(ctx, store, engine.Options{Routes: []engine.Route{plant}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}},
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	process := func(m sparkplug.Message, want engine.Outcome) engine.Decision {
		t.Helper()
		ds, err := e.Process(ctx, []engine.Message{{Topic: m.Topic, Payload: m.Payload}})
		if err != nil || ds[0].Outcome != want {
			t.Fatalf("%s: %+v, %v; want %s", m.Topic, ds, err, want)
		}
		return ds[0]
	}
	release := func(id uint64, want engine.Outcome) engine.Decision {
		t.Helper()
		d, err := e.Release(ctx, id, "j.doe")
		if err != nil || d.Outcome != want {
			t.Fatalf("release #%d: %+v, %v; want %s", id, d, err, want)
		}
		return d
	}
	edge := sparkplug.NewEdge("plant", "m1", 0)
	pulses := []sparkplug.Metric{{Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(1)}}
	birth := edge.Birth(start, pulses)
	held := process(edge.Data(start, pulses), engine.Quarantined) // before its NBIRTH
	again := release(held.Held, engine.Quarantined)               // the birth still unknown
	if again.Held == 0 || again.Held == held.Held {
		t.Fatalf("the release held again names entry #%d", again.Held)
	}
	process(birth, engine.Applied)
	release(again.Held, engine.Applied)

	rep, err := report.Build(report.Records(ctx, store, nil), report.Options{Now: func() time.Time { return clock.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Totals; got.Released != 1 || got.HeldAgain != 1 || got.Quarantined != 1 {
		t.Fatalf("totals: %d released, %d held again, %d quarantined; want 1, 1 and 1", got.Released, got.HeldAgain, got.Quarantined)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].Released != 1 || rep.Sources[0].HeldAgain != 1 {
		t.Fatalf("per source: %+v", rep.Sources)
	}
	if len(rep.Quarantine) != 2 {
		t.Fatalf("quarantine: %+v, want the first hold and the hold again", rep.Quarantine)
	}
	first, second := rep.Quarantine[0], rep.Quarantine[1]
	if first.ID != held.Held || first.Status != "held_again" || first.Resolved == nil || first.Resolved.Held != again.Held {
		t.Fatalf("the entry released and held again: %+v, resolution %+v", first, first.Resolved)
	}
	if second.ID != again.Held || second.Status != "released" {
		t.Fatalf("the entry that held it again: %+v", second)
	}
	var page strings.Builder
	if err := report.RenderHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`released and held again<b>1</b>`, `released by an operator<b>1</b>`,
		`<span class="status-held_again">released, held again</span> → quarantined as #` + strconv.FormatUint(again.Held, 10)} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
