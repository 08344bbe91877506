package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// snapshotStore holds its first commit at gate, and notes what that
// batch's first source and entity say once the commit goes on: by then the
// engine has decided the next batch, on the same rows.
type snapshotStore struct {
	engine.Store
	entered, gate chan struct{}
	commits       int
	bitmap        []uint64
	casualties    string
}

func (s *snapshotStore) Commit(ctx context.Context, b *engine.Batch) error {
	if s.commits++; s.commits == 1 {
		close(s.entered)
		<-s.gate
		s.bitmap = append([]uint64(nil), b.Sources[0].Epochs[0].Bitmap...)
		s.casualties = b.Entities[0].Fields.Get("casualties").Num
	}
	return s.Store.Commit(ctx, b)
}

// A batch's copy of a source's window and of an entity stays as the batch
// decided it while the engine decides the next batch on the same rows: the
// window's bitmap, which the copy shares until one of them changes it,
// included. And the next batch, decided while the copy is held, is right.
func TestABatchKeepsItsRowsWhileTheNextChangesThem(t *testing.T) {
	ss := &snapshotStore{Store: memory.New(), entered: make(chan struct{}), gate: make(chan struct{})}
	e, err := engine.New(t.Context(), ss, engine.Options{Routes: []engine.Route{incidentRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(seq int) engine.Message {
		return inc("fd", "e1", 1, seq, `"incident_id":"7","casualty_delta":1`)
	}
	waitA, err := e.Submit(t.Context(), []engine.Message{msg(1), msg(3)}) // 2 missing
	if err != nil {
		t.Fatal(err)
	}
	<-ss.entered
	waitB, err := e.Submit(t.Context(), []engine.Message{msg(2), msg(4), msg(3)}) // the late one, a new one, a replay
	if err != nil {
		t.Fatal(err)
	}
	close(ss.gate)
	if _, err := waitA(); err != nil {
		t.Fatal(err)
	}
	ds, err := waitB()
	if err != nil {
		t.Fatal(err)
	}
	if got := [3]engine.Outcome{ds[0].Outcome, ds[1].Outcome, ds[2].Outcome}; got != [3]engine.Outcome{engine.AppliedLate, engine.Applied, engine.Duplicate} {
		t.Fatalf("the next batch: %v, want applied_late, applied, duplicate", got)
	}
	// Sequence s is bit s of the first word (sequence_span ≥ 64).
	if want := uint64(1<<1 | 1<<3); len(ss.bitmap) == 0 || ss.bitmap[0] != want {
		t.Fatalf("the first batch's window, committed after the next was decided: bitmap %b, want %b (1 and 3 seen)", ss.bitmap[:min(1, len(ss.bitmap))], want)
	}
	if ss.casualties != "2" {
		t.Fatalf("the first batch's incident: %s casualties, want 2", ss.casualties)
	}
	snap, err := ss.Load(t.Context())
	if err != nil || len(snap.Sources) != 1 || snap.Sources[0].Epochs[0].Bitmap[0] != 1<<1|1<<2|1<<3|1<<4 {
		t.Fatalf("the stored window after both: %+v, %v, want 1 to 4 seen", snap.Sources, err)
	}
}
