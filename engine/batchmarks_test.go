package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// storedHigh is the highest sequence of the one source s holds.
func storedHigh(t *testing.T, s engine.Store) int64 {
	t.Helper()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Sources) != 1 {
		t.Fatalf("the store holds %d sources, want 1", len(snap.Sources))
	}
	return snap.Sources[0].Epochs[0].High
}

// A window another engine wrote, read back from a store that keeps the
// batch's values as they are (the memory store), is written again when
// this engine's batch changes it: which batch of an engine changed a
// window is that engine's own count, not the store's.
func TestAWindowAnotherEngineWroteIsWrittenWhenChangedAgain(t *testing.T) {
	ctx := context.Background()
	msg := func(seq int) engine.Message {
		return inc("fd", "e1", 1, seq, `"incident_id":1,"casualty_delta":1,"unit_id":"u","unit_status":"x"`)
	}
	t.Run("an engine started again", func(t *testing.T) {
		st := memory.New()
		for seq := 1; seq <= 2; seq++ {
			e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Process(ctx, []engine.Message{msg(seq)}); err != nil {
				t.Fatal(err)
			}
			e.Close()
		}
		if h := storedHigh(t, st); h != 2 {
			t.Fatalf("the stored window of e1 has high %d after sequence 2 was applied, want 2", h)
		}
	})
	t.Run("two members of a group", func(t *testing.T) {
		g := memory.NewGroup(0, 0)
		var es []*engine.Engine
		for _, name := range []string{"m1", "m2"} {
			m, err := g.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{incidentRoute}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			es = append(es, e)
		}
		for seq := 1; seq <= 4; seq++ {
			if _, err := es[(seq-1)%2].Process(ctx, []engine.Message{msg(seq)}); err != nil {
				t.Fatal(err)
			}
		}
		m, err := g.Open("")
		if err != nil {
			t.Fatal(err)
		}
		if h := storedHigh(t, m); h != 4 {
			t.Fatalf("the stored window of e1 has high %d after sequences 1 to 4 were applied, want 4", h)
		}
	})
}
