package sparkplug_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// unrecordingStore writes the Sparkplug rows the way a build from before
// the NDEATH records did: without the fields it did not know.
type unrecordingStore struct {
	*memory.Store
	t *testing.T
}

func (s unrecordingStore) Commit(ctx context.Context, b *engine.Batch) error {
	c := *b
	c.Sources = make([]engine.SourceState, len(b.Sources))
	for i, src := range b.Sources {
		if src.Sparkplug != nil {
			src.Sparkplug = unrecorded(s.t, src.Sparkplug)
		}
		c.Sources[i] = src
	}
	return s.Store.Commit(ctx, &c)
}

// unrecorded is st as a build from before the NDEATH records wrote it.
func unrecorded(t *testing.T, st *engine.SparkplugState) *engine.SparkplugState {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if !slices.Contains([]string{"bdseq", "online", "births", "retired"}, k) {
			delete(m, k) // the records, and what marks a row as holding them
		}
	}
	for _, list := range []string{"births", "retired"} {
		births, _ := m[list].([]any)
		for _, x := range births {
			birth := x.(map[string]any)
			delete(birth, "ended")
			delete(birth, "death")
			devices, _ := birth["devices"].(map[string]any)
			for _, dev := range devices {
				delete(dev.(map[string]any), "death")
			}
		}
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	out := new(engine.SparkplugState)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestADeathAppliedBeforeDeathsWereRecordedIsHeldOnceItsKeyLeftTheWindow:
// an edge's rows were written by a build that kept no record of the
// NDEATHs it applied; after the upgrade a failover's broker replays one
// of them once its key has left the key window. Nothing in the row tells
// whether it was applied: it is held, never applied a second time. An
// NDEATH the edge's row shows was not applied yet (its current session,
// online) is applied, recorded, and its replay is a duplicate.
func TestADeathAppliedBeforeDeathsWereRecordedIsHeldOnceItsKeyLeftTheWindow(t *testing.T) {
	for _, c := range []struct {
		name    string
		reborn  bool // the edge was born again after the NDEATH
		session int64
		online  bool
	}{
		{"an earlier session's, the edge born again since", true, 1, true},
		{"the current session's, the edge offline", false, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memory.New()
			t.Cleanup(func() { s.Close() })
			before := newHarness(t, unrecordingStore{s, t})
			clk := newClock()
			edge := sparkplug.NewEdge("plant", "m1", 0)
			before.expect(engine.Applied, edge.Birth(clk.next(), meterMetrics), edge.Data(clk.next(), pulse()))
			death := edge.Death(clk.next())
			before.expect(engine.Applied, death)
			if c.reborn {
				edge.NewSession()
				before.expect(engine.Applied, edge.Birth(clk.next(), meterMetrics), edge.Data(clk.next(), pulse()))
			}
			before.e.Close()

			h := newHarness(t, s)
			h.clock = before.clock.Add(engine.DefaultTTL + time.Hour)
			d := h.expect(engine.Quarantined, death)
			if !strings.HasPrefix(d[0].Reason, engine.ReasonOldEpoch) {
				t.Errorf("held (%s), want %s", d[0].Reason, engine.ReasonOldEpoch)
			}
			if r := h.source("m1").Sparkplug; r.Online != c.online || r.BdSeq != c.session {
				t.Fatalf("session %+v, want online %v in session %d", r, c.online, c.session)
			}
		})
	}
	t.Run("the current session's, not applied yet", func(t *testing.T) {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		before := newHarness(t, unrecordingStore{s, t})
		clk := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		before.expect(engine.Applied, edge.Birth(clk.next(), meterMetrics), edge.Data(clk.next(), pulse()))
		before.e.Close()

		h := newHarness(t, s)
		h.clock = before.clock.Add(engine.DefaultTTL + time.Hour)
		death := edge.Death(clk.next())
		h.expect(engine.Applied, death)
		h.clock = h.clock.Add(engine.DefaultTTL + time.Hour)
		if d := h.send(death); d[0].Outcome != engine.Duplicate {
			t.Errorf("the NDEATH again: %s (%s), want duplicate", d[0].Outcome, d[0].Reason)
		}
		if r := h.source("m1").Sparkplug; r.Online || r.BdSeq != 0 {
			t.Fatalf("session %+v, want offline in session 0", r)
		}
	})
}
