package report_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAConflictDeliveredAgainIsNoReplayOfTheAppliedReading: a reading of
// meter m1 is applied; another reading under its key is held as a
// conflict, and delivered again is a duplicate of that entry. Its key is
// the applied reading's, its content is not: the report counts it neither
// among the applied reading's suppressed replays nor in the entity's
// lineage as one, but with the deliveries held; a replay of the applied
// reading itself is counted.
func TestAConflictDeliveredAgainIsNoReplayOfTheAppliedReading(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	clock := start
	e, err := engine.New(ctx, s, engine.Options{Routes: lineageRoutes, Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reading := func(kwh string) engine.Message {
		return engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":` + kwh + `}`)}
	}
	for _, step := range []struct {
		msg  engine.Message
		want engine.Outcome
	}{
		{reading("1"), engine.Applied},
		{reading("5"), engine.Conflict},
		{reading("5"), engine.Duplicate}, // a duplicate of the conflict's entry
		{reading("5"), engine.Duplicate},
		{reading("1"), engine.Duplicate}, // a replay of the applied reading
	} {
		ds, err := e.Process(ctx, []engine.Message{step.msg})
		if err != nil || ds[0].Outcome != step.want {
			t.Fatalf("%s: %+v, %v; want %s", step.msg.Payload, ds, err, step.want)
		}
	}
	rep, err := report.Build(report.Records(ctx, s, nil), report.Options{Now: func() time.Time { return clock.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Replayed) != 1 || rep.Replayed[0] != (report.EntityReplays{Entity: "meter/m1", Suppressed: 1}) {
		t.Errorf("replayed %+v, want meter/m1 with 1 replay: the conflict delivered again is none", rep.Replayed)
	}
	ls, err := report.Lineages(report.Records(ctx, s, nil), report.LineageOptions{Entities: []string{"meter/m1"}})
	if err != nil {
		t.Fatal(err)
	}
	c := ls[0].Changes[0]
	if len(ls[0].Changes) != 1 || len(c.Suppressed) != 1 || len(c.Held) != 3 || ls[0].Suppressed != 1 {
		t.Errorf("lineage: %d changes, the first with %d suppressed and %d held, %d suppressed in all; want 1, 1, 3 (the conflict and its two deliveries again) and 1",
			len(ls[0].Changes), len(c.Suppressed), len(c.Held), ls[0].Suppressed)
	}
}
