package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// TestASequenceSpanTheEngineTakesGivesRowsTheStoreReadsBack: a span whose
// bitmap no stored row may hold is refused when the engine starts, not
// committed and then unreadable at the next read of its source.
func TestASequenceSpanTheEngineTakesGivesRowsTheStoreReadsBack(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 1 << 25}
	e, err := engine.New(context.Background(), s, opts)
	if err == nil || !errors.Is(err, engine.ErrConfig) {
		t.Fatalf("a span of 1<<25: %v, want ErrConfig", err)
	}
	opts.SequenceSpan = 1 << 24 // the widest a row holds
	if e, err = engine.New(context.Background(), s, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Process(context.Background(), []engine.Message{inc("fd", "e1", 1, 1, ""), inc("fd", "e1", 1, 3, ""), inc("fd", "e1", 1, 2, "")}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e, err = engine.New(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Process(context.Background(), []engine.Message{inc("fd", "e1", 1, 4, "")}); err != nil {
		t.Fatalf("a committed row cannot be read back: %v", err)
	}
}

// TestKeepEpochsIsBounded: a source's row holds its older epochs and is
// read and written whole, so their number is bounded.
func TestKeepEpochsIsBounded(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := engine.Options{Routes: []engine.Route{incidentRoute}, KeepEpochs: engine.MaxKeepEpochs + 1}
	if _, err := engine.New(context.Background(), s, opts); !errors.Is(err, engine.ErrConfig) {
		t.Fatalf("keep_epochs %d: %v, want ErrConfig", opts.KeepEpochs, err)
	}
	opts.KeepEpochs = engine.MaxKeepEpochs
	e, err := engine.New(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}
