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
