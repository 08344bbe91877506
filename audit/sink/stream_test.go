package sink_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// streamRig is a memory store, a sink set of one exporter on it in
// batches of 40, and an engine that wakes the set; nothing runs the set.
func streamRig(t *testing.T, exp sink.Exporter) (*memory.Store, *sink.Set, *engine.Engine) {
	t.Helper()
	st := memory.New()
	set, err := sink.New(st, sink.Options{Sinks: []sink.Sink{{Name: "siem", Exporter: exp}}, Batch: 40,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(t.Context(), st, engine.Options{Routes: meters, Observer: set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return st, set, e
}

// decideMeters commits n fresh decisions in one batch.
func decideMeters(t *testing.T, e *engine.Engine, from, n int) {
	t.Helper()
	msgs := make([]engine.Message, n)
	for i := range msgs {
		msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, from+i)}
	}
	if _, err := e.Process(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
}

// TestStreamFinishLandsTheBatchInFlightAndSendsNoRecordTwice: finish
// called while the receiver holds a batch waits for it to land, then
// delivers the rest to the head: every record once, in order.
func TestStreamFinishLandsTheBatchInFlightAndSendsNoRecordTwice(t *testing.T) {
	exp := &gatedExporter{recv: newChainExporter(), entered: make(chan struct{}), open: make(chan struct{})}
	st, set, e := streamRig(t, exp)
	finish := set.Stream(t.Context(), 5*time.Second)
	decideMeters(t, e, 0, 100)
	<-exp.entered // the stream holds positions 1..40 in the receiver
	decideMeters(t, e, 100, 100)
	finished := make(chan error, 1)
	go func() { finished <- finish() }()
	select {
	case err := <-finished:
		t.Fatalf("finish returned (%v) while a batch was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(exp.open)
	if err := <-finished; err != nil {
		t.Fatalf("finish: %v", err)
	}
	want := make([]uint64, 200)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if got := exp.recv.chain(""); !slices.Equal(got, want) {
		t.Fatalf("the receiver got %d records (%v...), want positions 1..200 once each, in order", len(got), got[:min(len(got), 50)])
	}
	if c, err := st.Cursor(t.Context(), "siem"); err != nil || c != 200 {
		t.Fatalf("cursor %d (%v), want 200", c, err)
	}
	if err := finish(); err != nil {
		t.Fatalf("a second finish: %v", err)
	}
}

// TestStreamFinishGivesUpOnAReceiverThatHangs: a receiver that never
// answers holds finish for the idle bound, not for good; finish names the
// sink and what it delivered, and the cursor keeps the records.
func TestStreamFinishGivesUpOnAReceiverThatHangs(t *testing.T) {
	exp := &gatedExporter{recv: newChainExporter(), entered: make(chan struct{}), open: make(chan struct{})}
	st, set, e := streamRig(t, exp)
	finish := set.Stream(t.Context(), 300*time.Millisecond)
	decideMeters(t, e, 0, 50)
	<-exp.entered
	start := time.Now()
	err := finish()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("finish took %s with a hung receiver and an idle bound of 300ms", took)
	}
	if !errors.Is(err, sink.ErrUndelivered) || err.Error() != "audit sink: records left undelivered: sink siem delivered up to 0 of 50" {
		t.Fatalf("finish with a hung receiver: %v", err)
	}
	if c, err := st.Cursor(t.Context(), "siem"); err != nil || c != 0 {
		t.Fatalf("cursor %d (%v), want 0", c, err)
	}
}
