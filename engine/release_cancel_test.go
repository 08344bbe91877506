package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAnOperatorWhoStopsWaitingDoesNotUndoTheRelease: on a single-owner
// store an operator's release is sealed and queued like any batch, and the
// feed's next batches are decided on top of it. The request that asked for
// it going away (a closed dashboard tab, the CLI's timeout) must not fail
// its commit: that would throw the batches behind it away and reload the
// engine's whole state.
func TestAnOperatorWhoStopsWaitingDoesNotUndoTheRelease(t *testing.T) {
	ctx := context.Background()
	e, g, id := heldBehindAGate(t)

	rctx, cancel := context.WithCancel(ctx)
	released := make(chan error, 1)
	go func() { _, err := e.Release(rctx, id, "alice"); released <- err }()
	<-g.entered // the release's commit is under way
	processed := make(chan error, 1)
	go func() {
		_, err := e.Process(ctx, []engine.Message{inc("fd", "e1", 1, 101, `"incident_id":1,"casualty_delta":4`)})
		processed <- err
	}()
	time.Sleep(100 * time.Millisecond) // the feed's batch is sealed behind the release
	cancel()
	close(g.gate)
	if err := <-released; err != nil {
		t.Errorf("release whose caller stopped waiting: %v", err)
	}
	if err := <-processed; err != nil {
		t.Errorf("the feed's batch behind the release: %v", err)
	}
	st, _ := json.Marshal(engine.StateJSON(e.State()))
	if !strings.Contains(string(st), `"casualties":7`) {
		t.Fatalf("state %s, want the release and the next batch applied (casualties 7)", st)
	}
	if _, err := g.Store.(*memory.Store).Quarantined(ctx, id); err == nil {
		t.Fatal("the released entry is still held")
	}
}
