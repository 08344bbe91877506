package storetest

import (
	"slices"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// member is a member handle with its chain.
type member struct {
	s *handle
	h *outboxHarness
}

func openOutboxMember(t *testing.T, p *place, id string) member {
	t.Helper()
	s := p.handle(t, id)
	return member{s: s, h: &outboxHarness{s: s, member: id}}
}

// withEntries commits a batch with entries to m's outbox and returns them.
func withEntries(t *testing.T, m member) []engine.OutboxEntry {
	t.Helper()
	recs := m.h.records(t, 2)
	es := []engine.OutboxEntry{outboxEntry(recs[0], 0, []byte("of "+m.h.member)), outboxEntry(recs[1], 1, []byte("and "+m.h.member))}
	m.h.commit(t, &engine.Batch{Audit: recs, Outbox: slices.Clone(es)})
	return es
}

func testOutboxMembers(t *testing.T, p *place) {
	a, b := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "b")
	ea, eb := threeBatches(t, a.h), threeBatches(t, b.h)
	if ea[0].ID != eb[0].ID {
		t.Fatalf("the members' first entries have ids %d and %d: the test wants them equal", ea[0].ID, eb[0].ID)
	}
	for _, viewer := range []member{a, b} {
		equalEntries(t, "a's entries", pending(t, viewer.s.caps.Outbox, "a"), ea)
		equalEntries(t, "b's entries", pending(t, viewer.s.caps.Outbox, "b"), eb)
	}
	done(t, a.h.ob(t), "a", ids(ea)...)
	if n := depth(t, a.h.ob(t), "a"); n != 0 {
		t.Fatalf("a's depth after done = %d", n)
	}
	equalEntries(t, "b's entries after a's were done", pending(t, a.h.ob(t), "b"), eb)
	// b's entries, done through a's handle (a drainer that took b over).
	done(t, a.h.ob(t), "b", eb[0].ID)
	// a holds b's eb[1]: a's batch, b's outbox.
	a.h.commit(t, &engine.Batch{Audit: a.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "b", ID: eb[1].ID, Reason: "refused"}, {Member: "a", ID: eb[2].ID, Reason: "not a's"}}})
	b.h.commit(t, &engine.Batch{Audit: b.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "b", ID: eb[3].ID, Reason: "refused too"}}})
	equalHeld(t, "held", held(t, b.h.ob(t)), []engine.HeldEntry{
		{OutboxEntry: eb[1], Member: "b", Reason: "refused"}, {OutboxEntry: eb[3], Member: "b", Reason: "refused too"}})
	equalEntries(t, "b's entries after the holds", pending(t, b.h.ob(t), "b"), append([]engine.OutboxEntry{eb[2]}, eb[4:]...))
	if n := depth(t, b.h.ob(t), "b"); n != len(eb)-3 {
		t.Fatalf("b's depth = %d, want %d", n, len(eb)-3)
	}
	if n := depth(t, b.h.ob(t), "nobody"); n != 0 {
		t.Fatalf("an unknown member's depth = %d", n)
	}
	if es := pending(t, b.h.ob(t), "nobody"); len(es) != 0 {
		t.Fatalf("an unknown member's outbox lists %d entries", len(es))
	}
}

func testOutboxReadOnly(t *testing.T, p *place) {
	a := openOutboxMember(t, p, "a")
	ea := withEntries(t, a)
	a.h.commit(t, &engine.Batch{Audit: a.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "a", ID: ea[1].ID, Reason: "refused"}}})
	ro := p.handle(t, "")
	o := ro.caps.Outbox
	equalEntries(t, "read-only listing", pending(t, o, "a"), ea[:1])
	if n := depth(t, o, "a"); n != 1 {
		t.Fatalf("read-only depth = %d", n)
	}
	equalHeld(t, "read-only held", held(t, o), []engine.HeldEntry{{OutboxEntry: ea[1], Member: "a", Reason: "refused"}})
	if err := o.OutboxDone(t.Context(), "a", ids(ea)); err == nil {
		t.Error("a read-only handle's OutboxDone succeeded")
	}
	equalEntries(t, "after a read-only done", pending(t, o, "a"), ea[:1])
	c := claimer(t, ro)
	if got, err := c.ClaimOutboxes(t.Context()); err == nil {
		t.Errorf("a read-only handle claimed %v", got)
	}
	if err := c.ReleaseOutbox(t.Context(), "a"); err == nil {
		t.Error("a read-only handle's ReleaseOutbox succeeded")
	}
}
