package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of Batch.OutboxResolved, on one handle (outboxCases) and
// between members of a group (the group outbox suite).

func testOutboxResolve(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	all := threeBatches(t, h)
	wantHeld := holdTwo(t, h, all) // all[1] and all[3]
	// Retry all[3]; drop all[1]: one batch each, with a record.
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[3].ID, Requeue: true}}})
	want := append([]engine.OutboxEntry{all[0], all[2], all[3]}, all[4:]...)
	equalEntries(t, "pending after a retry", pending(t, o, h.member), want)
	equalHeld(t, "held after a retry", held(t, o), wantHeld[:1])
	if n := depth(t, o, h.member); n != len(want) {
		t.Fatalf("OutboxDepth after a retry = %d, want %d", n, len(want))
	}
	page, err := o.Outbox(t.Context(), h.member, all[2].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != all[3].ID {
		t.Fatalf("Outbox(after %d, 1) = %v, %v; want the requeued entry %d", all[2].ID, ids(page), err, all[3].ID)
	}
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[1].ID}}})
	equalEntries(t, "pending after a drop", pending(t, o, h.member), want)
	if hs := held(t, o); hs != nil {
		t.Fatalf("held after the drop: %+v", hs)
	}
	// The requeued entry is an entry like the others: done removes it,
	// and it can be held again and retried again, in one batch with new
	// entries.
	done(t, o, h.member, all[3].ID)
	want = slices.DeleteFunc(want, func(e engine.OutboxEntry) bool { return e.ID == all[3].ID })
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: h.member, ID: all[2].ID, Reason: "again"}}})
	recs := h.records(t, 1)
	e := outboxEntry(recs[0], 0, []byte("with a retry"))
	h.commit(t, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{e},
		OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[2].ID, Requeue: true}}})
	want = append(want, e)
	equalEntries(t, "pending after a retry with new entries", pending(t, o, h.member), want)
	if n := depth(t, o, h.member); n != len(want) {
		t.Fatalf("OutboxDepth = %d, want %d", n, len(want))
	}
	if h.reopen == nil {
		return
	}
	h.s = h.reopen()
	o = h.ob(t)
	equalEntries(t, "pending after reopening", pending(t, o, h.member), want)
	if n := depth(t, o, h.member); n != len(want) {
		t.Fatalf("OutboxDepth after reopening = %d, want %d", n, len(want))
	}
}

func testOutboxResolveNotHeld(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	all := threeBatches(t, h)
	wantHeld := holdTwo(t, h, all)
	before := h.c
	done(t, o, h.member, all[2].ID)
	for _, c := range []struct {
		name string
		rs   []engine.OutboxResolve
	}{
		{"an id never written", []engine.OutboxResolve{{Member: h.member, ID: all[1].ID, Requeue: true}, {Member: h.member, ID: 1 << 60, Requeue: true}}},
		{"a pending entry", []engine.OutboxResolve{{Member: h.member, ID: all[3].ID}, {Member: h.member, ID: all[0].ID}}},
		{"a delivered entry", []engine.OutboxResolve{{Member: h.member, ID: all[1].ID}, {Member: h.member, ID: all[2].ID, Requeue: true}}},
		{"the held entry of another member", []engine.OutboxResolve{{Member: "nobody", ID: all[1].ID}}},
	} {
		if h.member == "" && c.name == "the held entry of another member" {
			continue // refused for naming a member, below
		}
		h.c = before
		recs := h.records(t, 1)
		err := h.s.Commit(t.Context(), &engine.Batch{Audit: recs, Entities: []engine.EntityState{entityState("x", 1)},
			Outbox: []engine.OutboxEntry{outboxEntry(recs[0], 0, []byte("not written"))}, OutboxResolved: c.rs})
		if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%s: Commit = %v, want ErrNotFound", c.name, err)
		}
	}
	equalHeld(t, "held after refused batches", held(t, o), wantHeld)
	want := append([]engine.OutboxEntry{all[0]}, all[4:]...)
	equalEntries(t, "pending after refused batches", pending(t, o, h.member), want)
	if snap := load(t, h.s); snap.AuditHead != before.head || len(snap.Entities) != 0 {
		t.Fatalf("a refused batch was written: head %+v, %d entities", snap.AuditHead, len(snap.Entities))
	}
	// Resolved once, not twice; and never twice in one batch.
	h.c = before
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[1].ID}}})
	err := h.s.Commit(t.Context(), &engine.Batch{Audit: h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[1].ID, Requeue: true}}})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a second resolution of one entry: Commit = %v, want ErrNotFound", err)
	}
	err = h.s.Commit(t.Context(), &engine.Batch{OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[3].ID}, {Member: h.member, ID: all[3].ID, Requeue: true}}})
	if !errors.Is(err, engine.ErrOutboxID) {
		t.Fatalf("two resolutions of one entry in a batch: Commit = %v, want ErrOutboxID", err)
	}
	equalHeld(t, "held at the end", held(t, o), wantHeld[1:])
	if h.member == "" {
		err := h.s.Commit(t.Context(), &engine.Batch{OutboxResolved: []engine.OutboxResolve{{Member: "m1", ID: all[3].ID}}})
		if err == nil || errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a resolution naming member m1 on a single-owner store: Commit = %v, want a refusal", err)
		}
	}
}

// testOutboxResolveRace resolves one held entry from two goroutines at
// once, many times: exactly one commit succeeds, the other is refused
// with ErrNotFound.
func testOutboxResolveRace(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	for round := range 20 {
		recs := h.records(t, 1)
		e := outboxEntry(recs[0], 0, fmt.Appendf(nil, "round %d", round))
		h.commit(t, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{e}})
		h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: h.member, ID: e.ID, Reason: "refused"}}})
		errs := make([]error, 2)
		together(
			func() {
				errs[0] = h.s.Commit(context.Background(), &engine.Batch{OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: e.ID, Requeue: true}}})
			},
			func() {
				errs[1] = h.s.Commit(context.Background(), &engine.Batch{OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: e.ID, Requeue: round%2 == 0}}})
			})
		won := oneWon(t, fmt.Sprintf("round %d", round), errs)
		if hs := held(t, o); hs != nil {
			t.Fatalf("round %d: still held: %+v", round, hs)
		}
		got := pending(t, o, h.member)
		if requeued := won == 0 || round%2 == 0; requeued {
			equalEntries(t, fmt.Sprintf("round %d: pending after the retry", round), got, []engine.OutboxEntry{e})
		} else if len(got) != 0 {
			t.Fatalf("round %d: %d entries pending after the drop", round, len(got))
		}
		done(t, o, h.member, e.ID)
	}
}

// oneWon checks that exactly one of errs is nil and the others
// ErrNotFound, and returns the winner's index.
func oneWon(t *testing.T, what string, errs []error) int {
	t.Helper()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("%s: two resolutions of one entry succeeded", what)
		case err == nil:
			won = i
		case !errors.Is(err, engine.ErrNotFound):
			t.Fatalf("%s: resolution %d: %v, want nil or ErrNotFound", what, i, err)
		}
	}
	if won < 0 {
		t.Fatalf("%s: no resolution succeeded: %v", what, errs)
	}
	return won
}

// forwardedIncident opens an engine with forwardRoutes on h's store and
// decides one incident update: its three outbox entries are pending.
func forwardedIncident(t *testing.T, h *outboxHarness) (*engine.Engine, engine.OutboxStore, []engine.OutboxEntry) {
	t.Helper()
	e, err := engine.New(t.Context(), h.s.Store, engine.Options{Routes: forwardRoutes, SequenceSpan: 64, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	o := h.ob(t)
	if _, err := e.Process(t.Context(), []engine.Message{incidentMsg(1, "7", "")}); err != nil {
		t.Fatal(err)
	}
	entries := pending(t, o, h.member)
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3", len(entries))
	}
	return e, o, entries
}

// testOutboxEngineResolve has the engine hold an entry, retry it, hold it
// again and drop it, and resolve one entry from two goroutines at once.
func testOutboxEngineResolve(t *testing.T, h *outboxHarness) {
	e, o, entries := forwardedIncident(t, h)
	hook := entries[2] // the webhook's
	if err := e.HoldForward(t.Context(), h.member, hook, "webhook https://cop.example/hooks/incidents: 422 Unprocessable Entity: unit unknown"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DropForward(t.Context(), h.member, hook.ID, " ", "duty officer"); !errors.Is(err, engine.ErrConfig) {
		t.Fatalf("DropForward without a reason = %v, want ErrConfig", err)
	}
	res, err := e.RetryForward(t.Context(), h.member, hook.ID, "the unit is registered now", "duty officer")
	if err != nil {
		t.Fatalf("RetryForward: %v", err)
	}
	r := res.Record
	if res.Entry.ID != hook.ID || res.Entry.Member != h.member || !strings.Contains(res.Entry.Reason, "422") {
		t.Fatalf("RetryForward resolved %+v", res.Entry)
	}
	last := lastRecord(t, h)
	if r.Position != last.Position || last.Outcome != engine.OutcomeForwardRetried || last.Ref != hook.ID || last.Key != hook.Key ||
		last.Operator != "duty officer" || last.Reason != "the unit is registered now" || last.Route != hook.Route || last.Member != h.member {
		t.Fatalf("the retry's audit record: %+v (returned position %d)", last, r.Position)
	}
	equalEntries(t, "pending after RetryForward", pending(t, o, h.member), entries)
	if _, err := e.RetryForward(t.Context(), h.member, hook.ID, "", "duty officer"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("RetryForward of an entry no longer held = %v, want ErrNotFound", err)
	}
	if err := e.HoldForward(t.Context(), h.member, hook, "422 again"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DropForward(t.Context(), h.member, hook.ID, "the incident was entered by hand", "shift lead"); err != nil {
		t.Fatalf("DropForward: %v", err)
	}
	last = lastRecord(t, h)
	if last.Outcome != engine.OutcomeForwardDropped || last.Ref != hook.ID || last.Operator != "shift lead" || last.Reason != "the incident was entered by hand" {
		t.Fatalf("the drop's audit record: %+v", last)
	}
	equalEntries(t, "pending after DropForward", pending(t, o, h.member), entries[:2])
	if hs := held(t, o); hs != nil {
		t.Fatalf("held after DropForward: %+v", hs)
	}
	// Two resolutions at once, through one engine: one commits.
	for round := range 10 {
		before := len(pending(t, o, h.member))
		if err := e.HoldForward(t.Context(), h.member, entries[0], "refused"); err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 2)
		together(
			func() { _, errs[0] = e.RetryForward(context.Background(), h.member, entries[0].ID, "", "a") },
			func() { _, errs[1] = e.DropForward(context.Background(), h.member, entries[0].ID, "gone", "b") })
		won := oneWon(t, fmt.Sprintf("round %d", round), errs)
		if got, want := len(pending(t, o, h.member)), before-won; got != want {
			t.Fatalf("round %d: resolution %d won, and %d entries are pending, want %d", round, won, got, want)
		}
		if won == 1 { // dropped: forward another message
			if _, err := e.Process(t.Context(), []engine.Message{incidentMsg(100+round, "", "")}); err != nil {
				t.Fatal(err)
			}
			entries = pending(t, o, h.member)
		}
	}
	if _, err := e.Process(t.Context(), []engine.Message{incidentMsg(1000, "7", "")}); err != nil {
		t.Fatalf("the engine after the races: %v", err)
	}
}

// testOutboxResolveMembers has a member resolve another's held entry,
// and two members resolve one entry at once, through their stores and
// through engines.
func testOutboxResolveMembers(t *testing.T, p *place) {
	a, b := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "b")
	eb := withEntries(t, b)
	b.h.commit(t, &engine.Batch{Audit: b.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "b", ID: eb[0].ID, Reason: "refused"}}})
	// a's batch, b's outbox; a's own outbox has no such entry.
	before := a.h.c
	err := a.s.Commit(t.Context(), &engine.Batch{Audit: a.h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: "a", ID: eb[0].ID, Requeue: true}}})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("resolving b's entry as a's: %v, want ErrNotFound", err)
	}
	a.h.c = before
	a.h.commit(t, &engine.Batch{Audit: a.h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: "b", ID: eb[0].ID, Requeue: true}}})
	equalEntries(t, "b's entries after a retried one", pending(t, b.h.ob(t), "b"), eb)
	if n := depth(t, a.h.ob(t), "a"); n != 0 {
		t.Fatalf("a's depth = %d: the retried entry went to b's outbox", n)
	}
	// Two members at once, each with a record of its own.
	for round := range 20 {
		b.h.commit(t, &engine.Batch{Audit: b.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "b", ID: eb[1].ID, Reason: "refused"}}})
		ca, cb := a.h.c, b.h.c
		ra, rb := a.h.records(t, 1), b.h.records(t, 1)
		errs := make([]error, 2)
		together(
			func() {
				errs[0] = a.s.Commit(context.Background(), &engine.Batch{Audit: ra, OutboxResolved: []engine.OutboxResolve{{Member: "b", ID: eb[1].ID, Requeue: true}}})
			},
			func() {
				errs[1] = b.s.Commit(context.Background(), &engine.Batch{Audit: rb, OutboxResolved: []engine.OutboxResolve{{Member: "b", ID: eb[1].ID, Requeue: true}}})
			})
		won := oneWon(t, fmt.Sprintf("round %d", round), errs)
		loser := []member{a, b}[1-won]
		if h, err := loser.s.Head(t.Context()); err != nil || h != []chain{ca, cb}[1-won].head {
			t.Fatalf("round %d: the refused member's head moved to %+v (%v)", round, h, err)
		}
		loser.h.c = []chain{ca, cb}[1-won]
		equalEntries(t, fmt.Sprintf("round %d: b's entries", round), pending(t, b.h.ob(t), "b"), eb)
	}
	// An id held in two members' outboxes needs the member.
	pos := max(a.h.c.head.Position, b.h.c.head.Position) + 1
	xa, xb := withEntryAt(t, a, pos), withEntryAt(t, b, pos)
	a.h.commit(t, &engine.Batch{Audit: a.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "a", ID: xa.ID, Reason: "refused"}}})
	b.h.commit(t, &engine.Batch{Audit: b.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "b", ID: xb.ID, Reason: "refused"}}})
	ea, eng := engineOn(t, a.s), engineOn(t, b.s) // after the harness's last commits
	if _, err := ea.DropForward(t.Context(), "", xa.ID, "x", ""); !errors.Is(err, engine.ErrAmbiguous) {
		t.Fatalf("DropForward of an id two members hold = %v, want ErrAmbiguous", err)
	}
	if _, err := ea.DropForward(t.Context(), "b", xb.ID, "x", ""); err != nil {
		t.Fatal(err)
	}
	if hs := held(t, a.h.ob(t)); len(hs) != 1 || hs[0].Member != "a" {
		t.Fatalf("held after dropping b's: %+v", hs)
	}
	if _, err := eng.DropForward(t.Context(), "", xa.ID, "x", ""); err != nil { // only a's is left
		t.Fatal(err)
	}
	// Engines on both members: "" finds the member, and one of two wins.
	for round := range 10 {
		if err := eng.HoldForward(t.Context(), "b", eb[1], "refused"); err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 2)
		var res [2]engine.ForwardResolution
		together(
			func() { res[0], errs[0] = ea.RetryForward(context.Background(), "", eb[1].ID, "", "a's operator") },
			func() { res[1], errs[1] = eng.RetryForward(context.Background(), "b", eb[1].ID, "", "b's operator") })
		won := oneWon(t, fmt.Sprintf("engines, round %d", round), errs)
		if won == 0 && (res[0].Record.Reason != "outbox of member b" || res[0].Record.Member != "a" || res[0].Entry.Member != "b") {
			t.Fatalf("a's resolution of b's entry: %+v; want its record in a's chain naming member b", res[0])
		}
		equalEntries(t, fmt.Sprintf("engines, round %d: b's entries", round), pending(t, b.h.ob(t), "b"), eb)
	}
}

// engineOn is an engine with forward routes on a member's handle.
func engineOn(t *testing.T, s *handle) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), s.Store, engine.Options{Routes: forwardRoutes, SequenceSpan: 64, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// withEntryAt commits records to m's chain up to position pos, the last
// with an entry, and returns the entry.
func withEntryAt(t *testing.T, m member, pos uint64) engine.OutboxEntry {
	t.Helper()
	recs := m.h.records(t, int(pos-m.h.c.head.Position))
	e := outboxEntry(recs[len(recs)-1], 0, []byte("of "+m.h.member))
	m.h.commit(t, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{e}})
	return e
}

// testOutboxEngineHoldPending has an operator hold a pending entry (the one
// a downstream keeps failing): it leaves the pending ones, held with an
// audit record naming the operator, member "" standing for the engine's
// own; an entry not pending is ErrNotFound, nothing written.
func testOutboxEngineHoldPending(t *testing.T, h *outboxHarness) {
	e, o, entries := forwardedIncident(t, h)
	if _, err := e.HoldPending(t.Context(), "", entries[1].ID, " ", "duty officer"); !errors.Is(err, engine.ErrConfig) {
		t.Fatalf("HoldPending without a reason = %v, want ErrConfig", err)
	}
	res, err := e.HoldPending(t.Context(), "", entries[1].ID, "dispatch answers 503 to it alone", "duty officer")
	if err != nil {
		t.Fatalf("HoldPending: %v", err)
	}
	last := lastRecord(t, h)
	if res.Entry.Member != h.member || res.Record.Position != last.Position || last.Outcome != engine.OutcomeForwardHeld ||
		last.Ref != entries[1].ID || last.Operator != "duty officer" || !strings.HasSuffix(last.Reason, ": held by an operator while pending: dispatch answers 503 to it alone") {
		t.Fatalf("the hold's audit record: %+v (entry of member %q)", last, res.Entry.Member)
	}
	equalEntries(t, "pending after HoldPending", pending(t, o, h.member), []engine.OutboxEntry{entries[0], entries[2]})
	if hs := held(t, o); len(hs) != 1 || hs[0].ID != entries[1].ID || hs[0].Member != h.member || hs[0].Reason != last.Reason {
		t.Fatalf("held after HoldPending: %+v", hs)
	}
	for _, id := range []uint64{entries[1].ID, entries[2].ID + 1, 0} {
		if _, err := e.HoldPending(t.Context(), h.member, id, "again", "duty officer"); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("HoldPending of %d, not pending = %v, want ErrNotFound", id, err)
		}
	}
	if lastRecord(t, h).Position != last.Position {
		t.Fatal("a refused hold wrote an audit record")
	}
	if _, err := e.RetryForward(t.Context(), h.member, entries[1].ID, "", "duty officer"); err != nil {
		t.Fatalf("RetryForward of the held entry: %v", err)
	}
	equalEntries(t, "pending after RetryForward", pending(t, o, h.member), entries)
}

// testOutboxEngineOtherMember has an operator name a member whose outbox
// does not hold the entry (a mistyped --member, or any member on a
// single-owner store): a hold, a retry and a drop are each ErrNotFound,
// the answer an entry that is not there gets, with nothing written.
func testOutboxEngineOtherMember(t *testing.T, h *outboxHarness) {
	e, o, entries := forwardedIncident(t, h)
	if _, err := e.HoldPending(t.Context(), "", entries[1].ID, "dispatch answers 503 to it alone", "duty officer"); err != nil {
		t.Fatalf("HoldPending: %v", err)
	}
	last := lastRecord(t, h)
	if _, err := e.HoldPending(t.Context(), "no-such-member", entries[0].ID, "again", "duty officer"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("HoldPending naming member no-such-member = %v, want ErrNotFound", err)
	}
	if _, err := e.RetryForward(t.Context(), "no-such-member", entries[1].ID, "", "duty officer"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("RetryForward naming member no-such-member = %v, want ErrNotFound", err)
	}
	if _, err := e.DropForward(t.Context(), "no-such-member", entries[1].ID, "gone", "duty officer"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("DropForward naming member no-such-member = %v, want ErrNotFound", err)
	}
	if lastRecord(t, h).Position != last.Position {
		t.Fatal("a refused hold or resolution wrote an audit record")
	}
	equalEntries(t, "pending after the refusals", pending(t, o, h.member), []engine.OutboxEntry{entries[0], entries[2]})
}
