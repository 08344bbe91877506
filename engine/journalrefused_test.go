package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// refusingJournal refuses the appends it is told to, as a full disk does.
type refusingJournal struct {
	*journal.Journal
	refuse  int // appends left to refuse
	batches []engine.JournalEntry
}

var errDiskFull = errors.New("no space left on device")

func (j *refusingJournal) Append(e engine.JournalEntry) error {
	if j.refuse > 0 {
		j.refuse--
		return errDiskFull
	}
	if e.Kind == engine.JournalBatch {
		j.batches = append(j.batches, e)
	}
	return j.Journal.Append(e)
}

// TestABatchTheJournalRefusedIsNotDecidedTwice: a batch committed to the
// store whose journal append fails is not acknowledged; passed again, its
// deliveries keep the decisions committed once the journal takes the
// entry: no second record of each, as a duplicate or a second held
// message, and each decision counted once.
func TestABatchTheJournalRefusedIsNotDecidedTwice(t *testing.T) {
	ctx := context.Background()
	m, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	jd, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer jd.Close()
	j := &refusingJournal{Journal: jd, refuse: 2}
	counts := recordCounts{}
	e, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{incidentRoute}, Observer: counts, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batch := []engine.Message{unitUpdate("e1", 1, "7", 1), {Topic: "incidents/fd", Payload: []byte(`{"agency":`)}, unitUpdate("e2", 1, "8", 2)}
	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := e.Process(ctx, batch); !errors.Is(err, errDiskFull) {
			t.Fatalf("attempt %d: Process = %v, want the journal's refusal", attempt, err)
		}
	}
	got, err := e.Process(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Outcome{engine.Applied, engine.Malformed, engine.Applied}
	for i, d := range got {
		if d.Outcome != want[i] || d.Position != uint64(i+1) {
			t.Errorf("delivery %d: %s at position %d, want %s at %d", i, d.Outcome, d.Position, want[i], i+1)
		}
	}
	if counts["applied"] != 2 || counts["malformed"] != 1 || len(counts) != 2 {
		t.Errorf("decisions observed %v, want 2 applied and 1 malformed", counts)
	}
	res, err := audit.VerifyChains(ctx, m, nil)
	if err != nil || len(res) != 1 || res[0].Records != 3 {
		t.Fatalf("chains %+v, %v: want one intact chain of 3 records", res, err)
	}
	held := 0
	if err := m.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { held++; return nil }); err != nil || held != 1 {
		t.Fatalf("%d messages held (%v), want the malformed one once", held, err)
	}
	if len(j.batches) != 1 || len(j.batches[0].Messages) != 3 || j.batches[0].First != 1 {
		t.Fatalf("journal batches %+v, want the one batch of 3 deliveries from position 1", j.batches)
	}
	// The next batch goes on from there.
	if got, err := e.Process(ctx, []engine.Message{unitUpdate("e3", 1, "9", 1)}); err != nil || got[0].Position != 4 {
		t.Fatalf("the next batch = %+v, %v: want applied at 4", got, err)
	}
}
