package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestAReleaseIsJournaledAsReleased: a release's record has the outcome of
// deciding the message again ("applied"); its journal entry names the
// action, which a recovery reports among the lost operator actions.
func TestAReleaseIsJournaledAsReleased(t *testing.T) {
	lg := newLossGroup(t, true)
	ctx := context.Background()
	old := []engine.Message{{Topic: "incidents/7", Payload: []byte(`{"agency":"fd","source_id":"e7","sequence":99,"boot_id":1,"incident_id":7,"casualty_delta":1}`)}}
	for s := 1; s <= 3; s++ {
		if _, err := lg.e.Process(ctx, []engine.Message{{Topic: "incidents/7", Payload: []byte(`{"agency":"fd","source_id":"e7","sequence":` + strconv.Itoa(s) + `,"boot_id":2,"incident_id":7,"casualty_delta":1}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := lg.e.Process(ctx, old)
	if err != nil || out[0].Outcome != engine.Quarantined {
		t.Fatal(out, err)
	}
	var id uint64
	lg.m.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error { id = q.ID; return nil })
	if _, err := lg.e.Release(ctx, id, "op"); err != nil {
		t.Fatal(err)
	}
	var last engine.JournalEntry
	lg.j.Replay(engine.AuditHead{}, func(e engine.JournalEntry) error { last = e; return nil })
	if last.Action != "released" {
		t.Fatalf("the release is journaled with Action %q, messages %d", last.Action, len(last.Messages))
	}
}
