package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// Data of a rebirth decided before its NBIRTH is applied in the birth
// before (epoch "0", above its highest). Once its key has left the key
// window, a redelivered copy is held ("it may have been applied there").
// Released, it would be taken for the rebirth's (epoch "0.1"), where
// nothing tells of it, and applied a second time; the audit log the store
// keeps records its content applied at epoch "0", seq 8: a duplicate the
// log proves, there.
func TestAReleasedCopyOfDataAppliedInTheBirthBeforeIsADuplicate(t *testing.T) {
	store := memory.New()
	h := newHarnessWith(t, store, func(o *engine.Options) { o.MaxEntries = 8 })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	for range 5 {
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	rebirth := edge.Birth(c.next(), meterMetrics)
	r := make([]sparkplug.Message, 41)
	for s := 1; s <= 40; s++ {
		r[s] = edge.Data(c.next(), pulse())
	}
	for s := 1; s <= 10; s++ { // before the rebirth's NBIRTH: 1 to 5 held, 6 to 10 applied in the birth before
		h.send(r[s])
	}
	if d := h.send(rebirth); !d[0].Outcome.Effective() {
		t.Fatalf("rebirth: %s (%s)", d[0].Outcome, d[0].Reason)
	}
	for s := 11; s <= 40; s++ {
		h.expect(engine.Applied, r[s])
	}
	for _, id := range heldIDs(t, store) { // r1 to r5, applied late in the rebirth
		if d, err := h.e.Release(t.Context(), id, "op"); err != nil || d.Outcome != engine.AppliedLate {
			t.Fatalf("release #%d: %s (%s), %v", id, d.Outcome, d.Reason, err)
		}
	}
	if got := h.field("meter/m1", "pulses"); got != "45" {
		t.Fatalf("pulses %s, want 45: one a message", got)
	}
	d := h.expect(engine.Quarantined, r[8]) // a broker's replay of r8
	if !strings.Contains(d[0].Reason, "it may have been applied there") {
		t.Fatalf("replay of r8 held: %s", d[0].Reason)
	}
	rel, err := h.e.Release(t.Context(), d[0].Held, "op")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Outcome != engine.Duplicate || rel.Epoch != "0" || rel.Sequence != 8 || !strings.Contains(rel.Reason, "the audit log records its key applied with the same content") {
		t.Fatalf("release of r8's copy: %s at epoch %q seq %d (%s), want a duplicate the log proves at epoch 0 seq 8", rel.Outcome, rel.Epoch, rel.Sequence, rel.Reason)
	}
	if got := h.field("meter/m1", "pulses"); got != "45" {
		t.Fatalf("pulses %s after the release, want 45: r8 applied once", got)
	}
}
