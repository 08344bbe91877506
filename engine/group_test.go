package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// countingStore counts commits and the audit records in them; the first
// commit says it began on entered, then waits for gate.
type countingStore struct {
	engine.Store
	entered, gate chan struct{}
	commits       int
	records       []uint64
}

func (c *countingStore) Commit(ctx context.Context, b *engine.Batch) error {
	if c.commits == 0 {
		close(c.entered)
		<-c.gate
	}
	c.commits++
	for _, r := range b.Audit {
		c.records = append(c.records, r.Position)
	}
	return c.Store.Commit(ctx, b)
}

type recordCount struct{ n int }

func (r *recordCount) Committed(recs []engine.AuditRecord, _ []engine.EntityState) { r.n += len(recs) }

// Batches that wait behind a commit are written in one commit, in order,
// the later write of a row winning; each waiter and the observer hear of
// its own batch.
func TestWaitingBatchesCommitTogether(t *testing.T) {
	store := memory.New()
	cs := &countingStore{Store: store, entered: make(chan struct{}), gate: make(chan struct{})}
	obs := &recordCount{}
	opts := engine.Options{Routes: []engine.Route{incidentRoute}, Observer: obs}
	e, err := engine.New(t.Context(), cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	var waits []func() ([]engine.Decision, error)
	for seq := 1; seq <= 4; seq++ { // the first blocks the committer; the other three wait
		w, err := e.Submit(t.Context(), []engine.Message{
			inc("fd", "e1", 1, seq, `"incident_id":"7","casualty_delta":1,"unit_id":"E7","unit_status":"s`+string(rune('0'+seq))+`"`),
			inc("fd", "e1", 1, seq, `"incident_id":"7","casualty_delta":1,"unit_id":"E7","unit_status":"s`+string(rune('0'+seq))+`"`),
		})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
		if seq == 1 {
			<-cs.entered
		}
	}
	close(cs.gate)
	for i, w := range waits {
		ds, err := w()
		if err != nil || ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Duplicate {
			t.Fatalf("batch %d: %+v, %v", i, ds, err)
		}
	}
	e.Close()
	if cs.commits != 2 {
		t.Errorf("4 batches, 3 of them waiting behind the first: %d commits, want 2", cs.commits)
	}
	for i, p := range cs.records {
		if p != uint64(i+1) {
			t.Fatalf("records committed in the order %v", cs.records)
		}
	}
	if obs.n != 8 {
		t.Errorf("the observer heard of %d records, want 8", obs.n)
	}
	// What the store holds is the last write of each row.
	again, err := engine.New(t.Context(), store, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	got, _ := json.Marshal(engine.StateJSON(again.State()))
	if want := `{"incident/7":{"casualties":4},"unit/E7":{"status":"s4"}}`; string(got) != want {
		t.Errorf("stored state %s, want %s", got, want)
	}
	ds, err := again.Process(t.Context(), []engine.Message{inc("fd", "e1", 1, 3, `"incident_id":"7","casualty_delta":1,"unit_id":"E7","unit_status":"s3"`)})
	if err != nil || ds[0].Outcome != engine.Duplicate {
		t.Errorf("sequence 3 again after a reload: %+v %v, want duplicate", ds, err)
	}
}
