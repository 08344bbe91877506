package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// A copy of a message applied before, held below its window once its key
// had left the key window (a path trailing the other, a late replay), is
// a duplicate when an operator releases it: the audit log records its key
// applied with the same content. It was applied a second time. One with
// other content, or never applied, is released as before.
func TestAReleasedCopyTheLogRecordsAppliedIsADuplicate(t *testing.T) {
	ctx := context.Background()
	for _, store := range []struct {
		name string
		open func(t *testing.T) engine.Store
	}{
		{"a single-owner store", func(*testing.T) engine.Store { return memory.New() }},
		{"a group member", func(t *testing.T) engine.Store {
			m, err := memory.NewGroup(0, 1).Open("m1") // the group's key window holds one key, as MaxEntries here
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
	} {
		t.Run(store.name, func(t *testing.T) {
			st := store.open(t)
			e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 64, MaxEntries: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			h := &harness{t: t, e: e}
			five := inc("fd", "e1", 1, 5, `"incident_id":1,"casualty_delta":2`)
			h.feed(five, inc("fd", "e1", 1, 100, `"incident_id":1,"casualty_delta":1`))
			never := inc("fd", "e1", 1, 6, `"incident_id":1,"casualty_delta":4`)
			if got := h.outcomes(five, never); got != "quarantined quarantined" {
				t.Fatalf("the copy of seq 5 and seq 6, below the window: %s", got)
			}
			var ids []uint64
			if err := st.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error { ids = append(ids, q.ID); return nil }); err != nil || len(ids) != 2 {
				t.Fatalf("held %v, %v", ids, err)
			}
			d, err := e.Release(ctx, ids[0], "op")
			if err != nil || d.Outcome != engine.Duplicate || !strings.Contains(d.Reason, "the audit log records its key applied with the same content at audit position 1") {
				t.Fatalf("release of the copy of seq 5: %s (%s), %v; want a duplicate the log proves", d.Outcome, d.Reason, err)
			}
			if d, err := e.Release(ctx, ids[1], "op"); err != nil || d.Outcome != engine.Applied {
				t.Fatalf("release of seq 6, never applied: %s (%s), %v", d.Outcome, d.Reason, err)
			}
			if got := h.state(); got != `{"incident/1":{"casualties":7}}` {
				t.Fatalf("state %s, want 7: each message once", got)
			}
		})
	}
}
