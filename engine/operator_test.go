package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

func TestReviewNamesTheOperator(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, engine.Options{SequenceSpan: 64})
	h.feed(inc("fd", "e1", 1, 100, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 5, `"incident_id":1,"casualty_delta":2`),
		engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"kwh":1}`)})
	ids := heldIDs(t, h)
	rel, err := h.e.Release(ctx, ids[0], "duty officer")
	if err != nil {
		t.Fatal(err)
	}
	dis, err := h.e.Discard(ctx, ids[1], "bench rig noise", "j.doe")
	if err != nil {
		t.Fatal(err)
	}
	byPos := map[uint64]engine.AuditRecord{}
	h.store.ScanAudit(ctx, 1, func(r engine.AuditRecord) error { byPos[r.Position] = r; return nil })
	t.Run("the release record names who released", func(t *testing.T) {
		if r := byPos[rel.Position]; r.Operator != "duty officer" || r.Ref != ids[0] {
			t.Fatalf("release record %+v", r)
		}
	})
	t.Run("the discard record names who discarded", func(t *testing.T) {
		if r := byPos[dis.Position]; r.Operator != "j.doe" || r.Outcome != engine.OutcomeDiscarded {
			t.Fatalf("discard record %+v", r)
		}
	})
	t.Run("deliveries name nobody", func(t *testing.T) {
		for pos, r := range byPos {
			if pos != rel.Position && pos != dis.Position && r.Operator != "" {
				t.Fatalf("record %d names %q", pos, r.Operator)
			}
		}
	})
	t.Run("the chain verifies and the export carries the names", func(t *testing.T) {
		if n, err := audit.Verify(ctx, h.store, engine.AuditHead{}); err != nil || n != 5 {
			t.Fatalf("verify: %d records, %v", n, err)
		}
		var b strings.Builder
		if _, err := audit.Export(ctx, h.store, 1, &b); err != nil {
			t.Fatal(err)
		}
		if _, err := audit.VerifyJSONL(strings.NewReader(b.String())); err != nil {
			t.Fatalf("verify the export: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if !strings.Contains(lines[rel.Position-1], `"ref":2,"operator":"duty officer",`) ||
			!strings.Contains(lines[dis.Position-1], `"operator":"j.doe"`) {
			t.Fatalf("export:\n%s", b.String())
		}
		if strings.Contains(lines[0], `"operator"`) {
			t.Fatalf("a delivery's record shows an operator: %s", lines[0])
		}
	})
}
