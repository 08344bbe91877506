package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// heldCommit is a memory store whose commits wait for release.
type heldCommit struct {
	*memory.Store
	release chan struct{}
}

func (h *heldCommit) Commit(ctx context.Context, b *engine.Batch) error {
	<-h.release
	return h.Store.Commit(ctx, b)
}

// TestReadyzWarnsOfACommitThatRunsLong: a commit that waits (a lock on a
// table, a slow disk) holds up the deliveries behind it; from CommitWarn
// on, /readyz's warning says so, and stops saying so once it is done.
func TestReadyzWarnsOfACommitThatRunsLong(t *testing.T) {
	st := &heldCommit{Store: memory.New(), release: make(chan struct{})}
	e := meterEngine(t, st)
	if w := commitWarning("postgres", e, time.Now()); w != "" {
		t.Fatalf("warning with no commit under way: %q", w)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Process(context.Background(), []engine.Message{{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r1","kwh":1}`)}})
		done <- err
	}()
	var since time.Time
	for ok := false; !ok; since, ok = e.Committing() {
		time.Sleep(time.Millisecond)
	}
	if w := commitWarning("postgres", e, since.Add(CommitWarn-time.Second)); w != "" {
		t.Errorf("warning before CommitWarn: %q", w)
	}
	w := commitWarning("postgres", e, since.Add(CommitWarn+2*time.Second))
	if !strings.Contains(w, "a commit to the postgres store has been running for 12s") || !strings.Contains(w, "pg_locks") {
		t.Errorf("warning after CommitWarn: %q", w)
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Committing(); ok {
		t.Error("a commit still under way after it returned")
	}
}
