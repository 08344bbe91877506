package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// With more rows in memory than the cache holds while a batch's commit
// is held at the store, the next batches are decided without waiting for
// it, and the rows that batch changed stay in memory: a later batch adds
// to its incident's count, not to the store's row from before it.
func TestBatchesAreDecidedWhileTheOneBeforeCommitsWithTheCacheFull(t *testing.T) {
	ctx := context.Background()
	rs := openRowStore(t, t.TempDir())
	fs := &failingStore{Store: rs, gate: make(chan struct{})}
	e, err := engine.New(ctx, fs, engine.Options{Routes: []engine.Route{incidentRoute}, CachedRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(src string, seq int64, incident, delta int) engine.Message {
		return inc("fd", src, 1, seq, fmt.Sprintf(`"incident_id":%d,"casualty_delta":%d,"unit_id":%q,"unit_status":"enroute"`, incident, delta, src))
	}
	batches := [][]engine.Message{
		{msg("e1", 1, 1, 1)},                     // its commit held at the store
		{msg("e2", 1, 2, 1), msg("e3", 1, 3, 1)}, // more rows than the cache holds
		{msg("e1", 2, 1, 2)},                     // on the rows of the first, in flight
	}
	submitted := make(chan []func() ([]engine.Decision, error), 1)
	go func() {
		var waits []func() ([]engine.Decision, error)
		for _, b := range batches {
			w, err := e.Submit(ctx, b)
			if err != nil {
				t.Error(err)
				break
			}
			waits = append(waits, w)
		}
		submitted <- waits
	}()
	var waits []func() ([]engine.Decision, error)
	select {
	case waits = <-submitted:
	case <-time.After(10 * time.Second):
		close(fs.gate)
		<-submitted
		t.Fatal("the batches behind a commit held at the store were not decided within 10s: trimming the cache waited for the commit")
	}
	close(fs.gate)
	for _, w := range waits {
		if _, err := w(); err != nil {
			t.Fatal(err)
		}
	}
	if got := casualties(t, rs, "incident/1"); got != "3" {
		t.Fatalf("incident/1 has %s casualties, want 3 (1, then 2 in a batch decided while the first committed)", got)
	}
}

// casualties reads an entity's committed casualties field.
func casualties(t *testing.T, s *rowStore, name string) string {
	t.Helper()
	snap, err := s.Store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range snap.Entities {
		if st.Name == name {
			if v, ok := st.Fields.Lookup("casualties"); ok {
				return v.Num
			}
		}
	}
	return "(none)"
}

// A row a committed batch created, and that no batch looked up since, is
// let go however roomy the cache: read again from the store when its
// source sends again, it is the committed row; looked up again, it stays.
func TestARowNotLookedUpSinceItsCreationIsLetGo(t *testing.T) {
	ctx := context.Background()
	rs := openRowStore(t, t.TempDir())
	e, err := engine.New(ctx, rs, engine.Options{Routes: []engine.Route{incidentRoute}, CachedRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(src string, seq int64) engine.Message {
		return inc("fd", src, 1, seq, fmt.Sprintf(`"incident_id":1,"casualty_delta":1,"unit_id":%q,"unit_status":"enroute"`, src))
	}
	steps := []struct {
		msgs   []engine.Message
		reread int64 // rows read back from the store, in all, after the batch
	}{
		{[]engine.Message{msg("e1", 1), msg("e2", 1)}, 0}, // e1, e2, their units and incident/1 created
		{[]engine.Message{msg("e3", 1)}, 1},               // incident/1, looked up again: read back
		{[]engine.Message{msg("e1", 2)}, 3},               // e1 and its unit, let go once batch 1 committed: read back
		{[]engine.Message{msg("e4", 1)}, 3},
		{[]engine.Message{msg("e1", 3)}, 3}, // looked up again in batch 3: kept
	}
	for i, s := range steps {
		if _, err := e.Process(ctx, s.msgs); err != nil {
			t.Fatal(err)
		}
		if got := rs.reread.Load(); got != s.reread {
			t.Fatalf("after batch %d the store read back %d rows, want %d", i+1, got, s.reread)
		}
	}
	if got := casualties(t, rs, "incident/1"); got != "6" {
		t.Fatalf("incident/1 has %s casualties, want 6", got)
	}
}
