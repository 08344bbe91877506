package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

func TestKeyWindowAge(t *testing.T) {
	t.Run("an id replayed after its key aged out cannot be caught and is applied", func(t *testing.T) {
		h := newHarness(t, engine.Options{TTL: time.Minute})
		h.feed(meter("m3", "a", "1"))
		h.clock = h.clock.Add(2 * time.Minute)
		if got := h.outcomes(meter("m3", "a", "1")); got != "applied" {
			t.Fatalf("got %s: an aged-out key is outside the window", got)
		}
	})
	t.Run("a sequence replayed after its key aged out is still caught by the source window", func(t *testing.T) {
		h := newHarness(t, engine.Options{TTL: time.Minute})
		h.feed(inc("fd", "e1", 1, 1, ""))
		h.clock = h.clock.Add(2 * time.Minute)
		if got := h.outcomes(inc("fd", "e1", 1, 1, `"casualty_delta":9`)); got != "duplicate" {
			t.Fatalf("got %s", got)
		}
	})
}

func heldIDs(t *testing.T, h *harness) []uint64 {
	t.Helper()
	var ids []uint64
	h.store.ScanQuarantine(context.Background(), func(q engine.QuarantineEntry) error { ids = append(ids, q.ID); return nil })
	return ids
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	t.Run("a message below the window is applied once when released", func(t *testing.T) {
		h := newHarness(t, engine.Options{SequenceSpan: 64})
		h.feed(inc("fd", "e1", 1, 100, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 5, `"incident_id":1,"casualty_delta":2`))
		ids := heldIDs(t, h)
		d, err := h.e.Release(ctx, ids[0], "")
		if err != nil || d.Outcome != engine.Applied || !strings.Contains(d.Reason, "released from quarantine #2") {
			t.Fatalf("release: %+v %v", d, err)
		}
		if got := h.state(); got != `{"incident/1":{"casualties":3}}` {
			t.Fatalf("state %s", got)
		}
		if _, err := h.e.Release(ctx, ids[0], ""); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a second release: %v, want ErrNotFound", err)
		}
		if got := h.outcomes(inc("fd", "e1", 1, 5, `"incident_id":1,"casualty_delta":2`)); got != "duplicate" {
			t.Fatalf("a replay of the released message: %s", got)
		}
	})
	// Two copies of one message are held once: the second is a duplicate
	// of the first's entry (it used to get an entry of its own, and each
	// release after the key left the window applied it again).
	t.Run("two held copies of one message are held once and apply once", func(t *testing.T) {
		h := newHarness(t, engine.Options{KeepEpochs: 1})
		h.feed(inc("fd", "e1", 3, 1, ""), inc("fd", "e1", 4, 1, ""), inc("fd", "e1", 5, 1, ""))
		old := inc("fd", "e1", 3, 2, `"incident_id":1,"casualty_delta":2`)
		ds := h.feed(old, old)
		ids := heldIDs(t, h)
		if len(ids) != 1 || ds[0].Held != ids[0] {
			t.Fatalf("held %v, the first copy as #%d; want one entry, the first copy's", ids, ds[0].Held)
		}
		if want := fmt.Sprintf("delivered again: held in quarantine as #%d, an open entry of the same key and content", ids[0]); ds[1].Outcome != engine.Duplicate || ds[1].Held != 0 || !strings.HasPrefix(ds[1].Reason, want) {
			t.Fatalf("second copy: %s, held as #%d (%s); want a duplicate naming #%d", ds[1].Outcome, ds[1].Held, ds[1].Reason, ids[0])
		}
		if got := h.outcomes(old); got != "duplicate" {
			t.Fatalf("a third copy in a batch of its own: %s, want duplicate", got)
		}
		if d, _ := h.e.Release(ctx, ids[0], ""); d.Outcome != engine.Applied {
			t.Fatalf("release: %s, want applied", d.Outcome)
		}
		if got := h.state(); got != `{"incident/1":{"casualties":2}}` {
			t.Fatalf("state %s", got)
		}
	})
	t.Run("a released conflict never applies its other content", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		h.feed(inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":5`))
		id := heldIDs(t, h)[0]
		d, err := h.e.Release(ctx, id, "")
		if err != nil || d.Outcome != engine.Duplicate {
			t.Fatalf("release: %+v %v", d, err)
		}
		if want := fmt.Sprintf("released from quarantine #%d: its key was applied with other content before it was held", id); d.Reason != want {
			t.Errorf("reason %q, want %q", d.Reason, want)
		}
		if got := h.state(); got != `{"incident/1":{"casualties":1}}` {
			t.Fatalf("state %s", got)
		}
	})
	t.Run("a malformed message stays held", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		h.feed(engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"kwh":1}`)})
		id := heldIDs(t, h)[0]
		if _, err := h.e.Release(ctx, id, ""); !errors.Is(err, engine.ErrStillMalformed) {
			t.Fatalf("got %v", err)
		}
		if ids := heldIDs(t, h); len(ids) != 1 {
			t.Fatal("a failed release removed the message")
		}
		if _, err := h.e.Discard(ctx, id, "", ""); err == nil {
			t.Fatal("a discard without a reason was accepted")
		}
		d, err := h.e.Discard(ctx, id, "bench rig noise", "")
		if err != nil || len(heldIDs(t, h)) != 0 || d.Position != 2 {
			t.Fatalf("discard: %+v %v", d, err)
		}
	})
}

// failingStore fails the commits it is told to: a fault a real store cannot
// be made to produce on demand. A commit waits for gate, when set, to be
// closed.
type failingStore struct {
	engine.Store
	fail bool
	gate chan struct{}
}

func (f *failingStore) Commit(ctx context.Context, b *engine.Batch) error {
	if f.gate != nil {
		<-f.gate
	}
	if f.fail {
		return errors.New("injected commit failure")
	}
	return f.Store.Commit(ctx, b)
}

func TestACommitFailureLeavesNoTrace(t *testing.T) {
	h := newHarness(t, engine.Options{})
	fs := &failingStore{Store: h.store}
	e, err := engine.New(context.Background(), fs, engine.Options{Routes: []engine.Route{incidentRoute}, Now: func() time.Time { return h.clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batch := []engine.Message{inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 2, `"incident_id":1,"casualty_delta":1`)}
	fs.fail = true
	if _, err := e.Process(context.Background(), batch); err == nil {
		t.Fatal("a failed commit returned no error")
	}
	fs.fail = false
	ds, err := e.Process(context.Background(), batch)
	if err != nil || ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Applied || ds[0].Position != 1 {
		t.Fatalf("the same batch again: %+v %v", ds, err)
	}
	if got, _ := e.Process(context.Background(), batch); got[0].Outcome != engine.Duplicate {
		t.Fatal("the committed batch is not remembered")
	}
}

func TestABatchSubmittedAfterAFailedOneIsAborted(t *testing.T) {
	h := newHarness(t, engine.Options{})
	fs := &failingStore{Store: h.store}
	e, err := engine.New(context.Background(), fs, engine.Options{Routes: []engine.Route{incidentRoute}, Now: func() time.Time { return h.clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := []engine.Message{inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`)}
	b := []engine.Message{inc("fd", "e1", 1, 2, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`)}
	// A's commit fails only once B is submitted: B is decided on top of it.
	// (Submitted after A failed, B would be decided on the state reloaded
	// without A, and commit.)
	fs.fail, fs.gate = true, make(chan struct{})
	waitA, err := e.Submit(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	waitB, err := e.Submit(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	close(fs.gate)
	if _, err := waitA(); err == nil {
		t.Fatal("a failed commit returned no error")
	}
	fs.fail = false
	if _, err := waitB(); !errors.Is(err, engine.ErrAborted) {
		t.Fatalf("the batch decided on top of the failed one: %v, want ErrAborted", err)
	}
	for _, batch := range [][]engine.Message{a, b} {
		if _, err := e.Process(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := json.Marshal(engine.StateJSON(e.State())); string(got) != `{"incident/1":{"casualties":2}}` {
		t.Fatalf("state after resubmitting both: %s", got)
	}
}

// logSignal closes failed when the engine logs a failed commit.
type logSignal struct {
	once   sync.Once
	failed chan struct{}
}

func (l *logSignal) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("commit failed")) {
		l.once.Do(func() { close(l.failed) })
	}
	return len(p), nil
}

// TestABatchSubmittedAfterAFailureNotYetTakenIsRefused: a caller that
// submits ahead (as ingest does) may submit the next batch after the
// previous one's commit failed but before its wait returned the failure.
// Decided on the reloaded state, that batch would commit ahead of the
// failed one: an older update over a newer, a sequence below the window
// when the failed batch comes again. It is refused until the failure is
// taken; then both, submitted again in order, apply in order.
func TestABatchSubmittedAfterAFailureNotYetTakenIsRefused(t *testing.T) {
	h := newHarness(t, engine.Options{})
	fs := &failingStore{Store: h.store, fail: true}
	sig := &logSignal{failed: make(chan struct{})}
	e, err := engine.New(context.Background(), fs, engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 64,
		Now: func() time.Time { return h.clock }, Logger: slog.New(slog.NewTextHandler(sig, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := []engine.Message{inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`)}
	b := []engine.Message{inc("fd", "e1", 1, 100, `"incident_id":1,"casualty_delta":2`)}
	waitA, err := e.Submit(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	<-sig.failed
	fs.fail = false
	if _, err := e.Submit(context.Background(), b); !errors.Is(err, engine.ErrAborted) {
		t.Fatalf("a batch submitted after a failure not yet taken: %v, want ErrAborted", err)
	}
	if _, err := waitA(); err == nil {
		t.Fatal("the failed commit returned no error")
	}
	for i, batch := range [][]engine.Message{a, b} {
		ds, err := e.Process(context.Background(), batch)
		if err != nil || ds[0].Outcome != engine.Applied {
			t.Fatalf("batch %d again: %+v, %v", i, ds, err)
		}
	}
	if st, _ := json.Marshal(engine.StateJSON(e.State())); !strings.Contains(string(st), `"casualties":3`) {
		t.Fatalf("state %s, want 3 casualties", st)
	}
}

// heldBehindAGate returns an engine on a store whose commits wait for its
// gate, and the id of the entry it holds (an incident update below the
// window, adding 2 casualties to incident 1, which holds 1).
func heldBehindAGate(t *testing.T) (*engine.Engine, *gatedStore, uint64) {
	t.Helper()
	ctx := context.Background()
	mem := memory.New()
	opts := engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 64}
	e0, err := engine.New(ctx, mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := e0.Process(ctx, []engine.Message{inc("fd", "e1", 1, 100, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 5, `"incident_id":1,"casualty_delta":2`)})
	if err != nil || ds[1].Outcome != engine.Quarantined {
		t.Fatalf("%+v, %v", ds, err)
	}
	e0.Close()
	g := &gatedStore{Store: mem, entered: make(chan struct{}), gate: make(chan struct{})}
	e, err := engine.New(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, g, ds[1].Position
}

// gatedStore holds every commit until gate is closed; entered is closed at
// the first.
type gatedStore struct {
	engine.Store
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedStore) Commit(ctx context.Context, b *engine.Batch) error {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.Store.Commit(ctx, b)
}

// TestAHeldMessageBeingDiscardedCannotBeReleased: while an operator's
// discard commits (the engine's lock let go), the entry is still held in
// the store; a release of it then is refused, not applied.
func TestAHeldMessageBeingDiscardedCannotBeReleased(t *testing.T) {
	ctx := context.Background()
	e, g, id := heldBehindAGate(t)
	discarded := make(chan error, 1)
	go func() { _, err := e.Discard(ctx, id, "bench noise", "alice"); discarded <- err }()
	<-g.entered
	released := make(chan error, 1)
	go func() { _, err := e.Release(ctx, id, "bob"); released <- err }()
	select {
	case err := <-released:
		if !errors.Is(err, engine.ErrInProgress) || errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "being released or discarded") {
			t.Errorf("release during the discard: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the release waited for the discard's commit")
	}
	close(g.gate)
	if err := <-discarded; err != nil {
		t.Fatal(err)
	}
	if st, _ := json.Marshal(engine.StateJSON(e.State())); strings.Contains(string(st), `"casualties":3`) {
		t.Fatalf("the discarded message was applied: %s", st)
	}
	if _, err := e.Release(ctx, id, "bob"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a release after the discard: %v", err)
	}
}

// TestAdmitCountsTheOutboxEntriesOfBatchesInFlight: a batch submitted
// while the one before it commits is admitted against the outbox with
// that batch's entries counted (they are in no outbox yet); once the
// batch commits, or fails, they no longer count as in flight.
func TestAdmitCountsTheOutboxEntriesOfBatchesInFlight(t *testing.T) {
	ctx := context.Background()
	r := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"source_id"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{source_id}"}}}}
	fs := &failingStore{Store: memory.New(), gate: make(chan struct{})}
	var seen []int
	e, err := engine.New(ctx, fs, engine.Options{Routes: []engine.Route{r},
		Admit: func(_ context.Context, inFlight func() int) error { seen = append(seen, inFlight()); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(id string) engine.Message {
		return engine.Message{Topic: "incidents/x", Payload: fmt.Appendf(nil, `{"msgId":%q,"source_id":"s1"}`, id)}
	}
	wait1, err := e.Submit(ctx, []engine.Message{msg("m1"), msg("m2"), msg("m3")})
	if err != nil {
		t.Fatal(err)
	}
	wait2, err := e.Submit(ctx, []engine.Message{msg("m4")}) // the first is held at its commit
	if err != nil {
		t.Fatal(err)
	}
	close(fs.gate)
	for _, wait := range []func() ([]engine.Decision, error){wait1, wait2} {
		if _, err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	fs.fail = true
	wait3, err := e.Submit(ctx, []engine.Message{msg("m5"), msg("m6")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait3(); err == nil {
		t.Fatal("the injected failure committed")
	}
	fs.fail = false
	if _, err := e.Process(ctx, []engine.Message{msg("m5")}); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 3, 0, 0}; !slices.Equal(seen, want) {
		t.Fatalf("entries in flight as Admit saw them: %v, want %v", seen, want)
	}
}
