package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// OutboxGroup is one group store for RunSharedOutbox.
type OutboxGroup struct {
	// Open opens a handle on the group under a member id ("" read-only),
	// as an Opener does. Its claims should last a second or so
	// (OutboxClaimer.ClaimTTL): the takeover cases wait for leases and
	// claims to expire.
	Open Opener
	// Kill ends a handle as kill -9 ends its process: it stops renewing
	// the member's lease and releases nothing, neither the lease nor its
	// outbox claims. The handle is not used again.
	Kill func(engine.SharedStore)
}

// RunSharedOutbox runs the outbox suite on a shared store: the cases of
// RunOutbox on one member's handle (reopened by closing it and opening the
// member again), then the group's: members' outboxes are separate, and
// engine.OutboxClaimer's claims hand a member's outbox to one process at
// a time, a dead member's to another after its lease expired. group
// returns a new, empty group store for each subtest.
func RunSharedOutbox(t *testing.T, group func(t *testing.T) OutboxGroup) {
	t.Helper()
	for _, tc := range outboxCases {
		t.Run(tc.name, func(t *testing.T) {
			g := group(t)
			h := &outboxHarness{s: openMember(t, g.Open, "m1"), member: "m1"}
			h.reopen = func() engine.Store {
				closeStore(t, h.s)
				return openMember(t, g.Open, "m1")
			}
			tc.fn(t, h)
		})
	}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, g OutboxGroup)
	}{
		{"each member's outbox is its own; a hold may name another member's", testOutboxMembers},
		{"a read-only handle lists every outbox and claims nothing", testOutboxReadOnly},
		{"a member resolves another's held entry; of two members resolving one, one commits", testOutboxResolveMembers},
		{"a live member's outbox is claimed by itself only", testClaimLive},
		{"a dead member's outbox is claimed by one other member once its lease expired", testClaimDead},
		{"a restarted member waits for its outbox's claimant, then drains it", testClaimRestart},
		{"a claim that is not released expires", testClaimExpires},
		{"two members claiming one outbox at once: one gets it", testClaimRace},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, group(t)) })
	}
}

// member is a member handle with its chain.
type member struct {
	s SharedBackend
	h *outboxHarness
}

func openOutboxMember(t *testing.T, g OutboxGroup, id string) member {
	t.Helper()
	s := openMember(t, g.Open, id)
	return member{s: s, h: &outboxHarness{s: s, member: id}}
}

func claimer(t *testing.T, s engine.Store) engine.OutboxClaimer {
	t.Helper()
	c, ok := s.(engine.OutboxClaimer)
	if !ok {
		t.Fatalf("%T does not implement engine.OutboxClaimer", s)
	}
	return c
}

func claims(t *testing.T, s engine.Store) []string {
	t.Helper()
	got, err := claimer(t, s).ClaimOutboxes(t.Context())
	if err != nil {
		t.Fatalf("ClaimOutboxes: %v", err)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("ClaimOutboxes = %v, not sorted", got)
	}
	return got
}

func release(t *testing.T, s engine.Store, member string) {
	t.Helper()
	if err := claimer(t, s).ReleaseOutbox(t.Context(), member); err != nil {
		t.Fatalf("ReleaseOutbox(%q): %v", member, err)
	}
}

// eventually polls ok until it holds, failing after what leases and claims
// of ttl could take many times over.
func eventually(t *testing.T, ttl time.Duration, what string, ok func() bool) {
	t.Helper()
	limit := 10*ttl + 5*time.Second
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(ttl / 20)
	}
}

// withEntries commits a batch with entries to m's outbox and returns them.
func withEntries(t *testing.T, m member) []engine.OutboxEntry {
	t.Helper()
	recs := m.h.records(t, 2)
	es := []engine.OutboxEntry{outboxEntry(recs[0], 0, []byte("of "+m.h.member)), outboxEntry(recs[1], 1, []byte("and "+m.h.member))}
	m.h.commit(t, &engine.Batch{Audit: recs, Outbox: slices.Clone(es)})
	return es
}

func testOutboxMembers(t *testing.T, g OutboxGroup) {
	a, b := openOutboxMember(t, g, "a"), openOutboxMember(t, g, "b")
	ea, eb := threeBatches(t, a.h), threeBatches(t, b.h)
	if ea[0].ID != eb[0].ID {
		t.Fatalf("the members' first entries have ids %d and %d: the test wants them equal", ea[0].ID, eb[0].ID)
	}
	for _, viewer := range []member{a, b} {
		equalEntries(t, "a's entries", pending(t, viewer.s.(engine.OutboxStore), "a"), ea)
		equalEntries(t, "b's entries", pending(t, viewer.s.(engine.OutboxStore), "b"), eb)
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

func testOutboxReadOnly(t *testing.T, g OutboxGroup) {
	a := openOutboxMember(t, g, "a")
	ea := withEntries(t, a)
	a.h.commit(t, &engine.Batch{Audit: a.h.records(t, 1), OutboxHeld: []engine.OutboxHold{{Member: "a", ID: ea[1].ID, Reason: "refused"}}})
	ro := openMember(t, g.Open, "")
	o := ro.(engine.OutboxStore)
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

func testClaimLive(t *testing.T, g OutboxGroup) {
	a, b := openOutboxMember(t, g, "a"), openOutboxMember(t, g, "b")
	if got := claims(t, a.s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a with an empty outbox claimed %v, want [a]", got)
	}
	withEntries(t, a)
	withEntries(t, b)
	for range 3 {
		if got := claims(t, a.s); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("a claimed %v, want [a]", got)
		}
		if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("b claimed %v, want [b]: a is live", got)
		}
	}
	release(t, a.s, "a")
	release(t, a.s, "b") // not a's: left alone
	if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed %v after a released its claim, want [b]: a is live", got)
	}
	if got := claims(t, a.s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a claimed %v after releasing, want [a]", got)
	}
}

// claimOf has one of ms claim target's outbox, and returns which; never
// two at once, never a member in never.
func claimOf(t *testing.T, target string, never []string, ms ...member) int {
	t.Helper()
	ttl := claimer(t, ms[0].s).ClaimTTL()
	winner := -1
	eventually(t, ttl, "the outbox of "+target+" claimed", func() bool {
		got := make([][]string, len(ms))
		var fns []func()
		for i := range ms {
			c := claimer(t, ms[i].s)
			fns = append(fns, func() { got[i], _ = c.ClaimOutboxes(t.Context()) })
		}
		together(fns...)
		for i, g := range got {
			if g == nil || !slices.Contains(g, ms[i].h.member) {
				t.Fatalf("%s claimed %v: not its own outbox", ms[i].h.member, g)
			}
			for _, n := range never {
				if slices.Contains(g, n) {
					t.Fatalf("%s claimed %v, with %s", ms[i].h.member, g, n)
				}
			}
			if slices.Contains(g, target) {
				if winner >= 0 {
					t.Fatalf("%s and %s both claimed the outbox of %s", ms[winner].h.member, ms[i].h.member, target)
				}
				winner = i
			}
		}
		return winner >= 0
	})
	return winner
}

// stillHeld checks that loser does not get target's outbox while
// holder's claim, renewed at start, lives.
func stillHeld(t *testing.T, target string, holder, loser engine.Store) {
	t.Helper()
	start := time.Now()
	if got := claims(t, holder); !slices.Contains(got, target) {
		t.Fatalf("the claimant of %s's outbox could not renew it: %v", target, got)
	}
	ttl := claimer(t, holder).ClaimTTL()
	for range 3 {
		got := claims(t, loser)
		if slices.Contains(got, target) && time.Since(start) < ttl {
			t.Fatalf("%s's outbox claimed (%v) while another's claim of it lived", target, got)
		}
	}
}

func testClaimDead(t *testing.T, g OutboxGroup) {
	a, d := openOutboxMember(t, g, "a"), openOutboxMember(t, g, "d")
	b, c := openOutboxMember(t, g, "b"), openOutboxMember(t, g, "c")
	withEntries(t, a)
	withEntries(t, b)
	ttl := claimer(t, a.s).ClaimTTL()
	claims(t, a.s)
	claims(t, d.s)
	// Never while a lives.
	for range 3 {
		for _, m := range []member{b, c} {
			if got := claims(t, m.s); !slices.Equal(got, []string{m.h.member}) {
				t.Fatalf("%s claimed %v while a and d live", m.h.member, got)
			}
		}
	}
	g.Kill(d.s) // its outbox is empty: nobody claims it
	time.Sleep(ttl / 2)
	g.Kill(a.s) // after d: d's lease is gone once a's is
	w := claimOf(t, "a", []string{"d"}, b, c)
	holder, loser := []member{b, c}[w], []member{b, c}[1-w]
	stillHeld(t, "a", holder.s, loser.s)
	// A claimant that closes releases its claims and its lease: the other
	// takes over a's outbox, and the closed one's when it holds entries.
	closeStore(t, holder.s)
	want := []string{"a", loser.h.member}
	if holder.h.member == "b" {
		want = []string{"a", "b", "c"}
	}
	if got := claims(t, loser.s); !slices.Equal(got, want) {
		t.Fatalf("%s claimed %v after %s closed, want %v", loser.h.member, got, holder.h.member, want)
	}
}

// takenOver kills a member with pending entries and waits for b to claim
// its outbox.
func takenOver(t *testing.T, g OutboxGroup, a, b member) {
	t.Helper()
	withEntries(t, a)
	claims(t, a.s)
	g.Kill(a.s)
	claimOf(t, "a", nil, b)
}

func testClaimRestart(t *testing.T, g OutboxGroup) {
	a, b := openOutboxMember(t, g, "a"), openOutboxMember(t, g, "b")
	takenOver(t, g, a, b)
	start := time.Now()
	if got := claims(t, b.s); !slices.Contains(got, "a") {
		t.Fatalf("b could not renew its claim of a's outbox: %v", got)
	}
	a2 := openOutboxMember(t, g, "a") // not refused for b's claim
	ttl := claimer(t, b.s).ClaimTTL()
	if got := claims(t, a2.s); len(got) != 0 && time.Since(start) < ttl {
		t.Fatalf("restarted a claimed %v while b's claim of its outbox lived", got)
	}
	// a lives again: b's claim of its outbox is no longer renewed or
	// returned, and once b releases it, a drains its own.
	if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed %v with a live again, want [b]", got)
	}
	release(t, b.s, "a")
	if got := claims(t, a2.s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("restarted a claimed %v after b released its outbox, want [a]", got)
	}
	if es := pending(t, a2.s.(engine.OutboxStore), "a"); len(es) != 2 {
		t.Fatalf("a's outbox after the restart holds %d entries, want 2", len(es))
	}
}

func testClaimExpires(t *testing.T, g OutboxGroup) {
	a, b := openOutboxMember(t, g, "a"), openOutboxMember(t, g, "b")
	takenOver(t, g, a, b)
	a2 := openOutboxMember(t, g, "a")
	ttl := claimer(t, a2.s).ClaimTTL()
	// b keeps running but stops draining a's outbox without releasing it.
	eventually(t, ttl, "restarted a claims its outbox once b's claim expired", func() bool {
		return slices.Equal(claims(t, a2.s), []string{"a"})
	})
	if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed %v after a took its outbox back", got)
	}
}

func testClaimRace(t *testing.T, g OutboxGroup) {
	a, b, c := openOutboxMember(t, g, "a"), openOutboxMember(t, g, "b"), openOutboxMember(t, g, "c")
	takenOver(t, g, a, b)
	release(t, b.s, "a")
	for range 50 {
		w := claimOf(t, "a", nil, b, c)
		release(t, []member{b, c}[w].s, "a")
	}
}
