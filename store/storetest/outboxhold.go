package storetest

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The outbox cases of holds, reopening, copies, limits and closing.

// holdTwo holds all[1] and all[3] (and an unknown id, left alone) in a
// batch of one record, and returns the held entries expected.
func holdTwo(t *testing.T, h *outboxHarness, all []engine.OutboxEntry) []engine.HeldEntry {
	t.Helper()
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxHeld: []engine.OutboxHold{
		{Member: h.member, ID: all[1].ID, Reason: "webhook https://cop.example/hooks: 422 Unprocessable Entity: {\"error\":\"unit unknown\"}"},
		{Member: h.member, ID: all[3].ID, Reason: "nats cop: refused"},
		{Member: h.member, ID: 1 << 60, Reason: "never written"},
	}})
	return []engine.HeldEntry{
		{OutboxEntry: all[1], Member: h.member, Reason: "webhook https://cop.example/hooks: 422 Unprocessable Entity: {\"error\":\"unit unknown\"}"},
		{OutboxEntry: all[3], Member: h.member, Reason: "nats cop: refused"},
	}
}

func equalHeld(t *testing.T, what string, got, want []engine.HeldEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d held entries, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range got {
		if got[i].Member != want[i].Member || got[i].Reason != want[i].Reason {
			t.Fatalf("%s: held entry %d of %q, %q; want of %q, %q", what, got[i].ID, got[i].Member, got[i].Reason, want[i].Member, want[i].Reason)
		}
		equalEntries(t, what, []engine.OutboxEntry{got[i].OutboxEntry}, []engine.OutboxEntry{want[i].OutboxEntry})
	}
}

func testOutboxHold(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	all := threeBatches(t, h)
	wantHeld := holdTwo(t, h, all)
	equalHeld(t, "held", held(t, o), wantHeld)
	want := append([]engine.OutboxEntry{all[0], all[2]}, all[4:]...)
	equalEntries(t, "pending after the holds", pending(t, o, h.member), want)
	if n := depth(t, o, h.member); n != len(want) {
		t.Fatalf("OutboxDepth = %d, want %d: held entries are not pending", n, len(want))
	}
	// Done of a held entry leaves it held; a hold of a delivered entry is
	// left alone.
	done(t, o, h.member, all[1].ID, all[0].ID)
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: h.member, ID: all[0].ID, Reason: "late"}}})
	equalHeld(t, "held after done", held(t, o), wantHeld)
	equalEntries(t, "pending after done", pending(t, o, h.member), want[1:])
}

func testOutboxReopen(t *testing.T, h *outboxHarness) {
	if h.reopen == nil {
		t.Skip("the store keeps nothing across close")
	}
	all := threeBatches(t, h)
	wantHeld := holdTwo(t, h, all)
	done(t, h.ob(t), h.member, all[0].ID)
	want := append([]engine.OutboxEntry{all[2]}, all[4:]...)
	h.s = h.reopen()
	o := h.ob(t)
	equalEntries(t, "pending after reopening", pending(t, o, h.member), want)
	equalHeld(t, "held after reopening", held(t, o), wantHeld)
	if n := depth(t, o, h.member); n != len(want) {
		t.Fatalf("OutboxDepth after reopening = %d, want %d", n, len(want))
	}
	// The reopened store goes on: a new batch's entries follow.
	recs := h.records(t, 1)
	e := outboxEntry(recs[0], 0, []byte("after reopening"))
	h.commit(t, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{e}})
	equalEntries(t, "pending after a new batch", pending(t, o, h.member), append(want, e))
}

func testOutboxCopies(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	recs := h.records(t, 1)
	e := outboxEntry(recs[0], 0, []byte("original"))
	e.Source = []string{"fd", "e1"}
	b := &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{e}}
	b.Outbox[0].Payload, b.Outbox[0].Source = []byte("original"), []string{"fd", "e1"}
	h.commit(t, b)
	b.Outbox[0].Payload[0], b.Outbox[0].Source[0] = 'X', "XX" // the caller's slices, after the commit
	got := pending(t, o, h.member)
	equalEntries(t, "after the caller changed its batch", got, []engine.OutboxEntry{e})
	got[0].Payload[0], got[0].Source[0] = 'Y', "YY"
	equalEntries(t, "after the caller changed a listed entry", pending(t, o, h.member), []engine.OutboxEntry{e})
}

func testOutboxLimit(t *testing.T, h *outboxHarness) {
	threeBatches(t, h)
	for _, limit := range []int{0, -1} {
		if es, err := h.ob(t).Outbox(t.Context(), h.member, 0, limit); err == nil {
			t.Errorf("Outbox(limit %d) = %d entries, nil; want an error", limit, len(es))
		}
	}
}

func testOutboxSingleOwner(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	threeBatches(t, h)
	if _, err := o.Outbox(t.Context(), "m1", 0, 10); err == nil {
		t.Error("Outbox of member m1 on a single-owner store: no error")
	}
	if err := o.OutboxDone(t.Context(), "m1", []uint64{1}); err == nil {
		t.Error("OutboxDone of member m1 on a single-owner store: no error")
	}
	if _, err := o.OutboxDepth(t.Context(), "m1"); err == nil {
		t.Error("OutboxDepth of member m1 on a single-owner store: no error")
	}
	err := h.s.Commit(t.Context(), &engine.Batch{Audit: h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "m1", ID: 1, Reason: "x"}}})
	if err == nil {
		t.Error("a hold naming member m1 on a single-owner store was committed")
	}
}

func testOutboxClosed(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	threeBatches(t, h)
	closeStore(t, h.s)
	ctx := t.Context()
	for name, err := range map[string]error{
		"Outbox":      func() error { _, err := o.Outbox(ctx, h.member, 0, 10); return err }(),
		"OutboxDone":  o.OutboxDone(ctx, h.member, []uint64{1}),
		"OutboxDepth": func() error { _, err := o.OutboxDepth(ctx, h.member); return err }(),
		"OutboxHeld":  func() error { _, err := o.OutboxHeld(ctx); return err }(),
	} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}
