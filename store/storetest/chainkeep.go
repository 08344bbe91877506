package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of engine.ChainKeeper: each member's chain is trimmed on its
// own, keeps its base and its head, and has its own sink cursors.

// keeper is the handle's declared Keeper.
func keeper(t *testing.T, s *handle) engine.ChainKeeper {
	t.Helper()
	if s.caps.Keeper == nil {
		t.Fatalf("%T declares no Capabilities.Keeper", s.Store)
	}
	return s.caps.Keeper
}

// trimChain trims member's chain below below through s, to base.
func trimChain(t *testing.T, s *handle, member string, below uint64, base engine.AuditHead) {
	t.Helper()
	if err := keeper(t, s).TrimChain(t.Context(), member, below, base); err != nil {
		t.Fatalf("%s: TrimChain(%s, %d): %v", s.member, member, below, err)
	}
}

func chainBase(t *testing.T, s *handle, member string) engine.AuditHead {
	t.Helper()
	b, err := keeper(t, s).ChainBase(t.Context(), member)
	if err != nil {
		t.Fatalf("ChainBase(%s): %v", member, err)
	}
	return b
}

func scanChain(t *testing.T, s *handle, member string, from uint64) []engine.AuditRecord {
	t.Helper()
	var out []engine.AuditRecord
	err := s.ScanChain(t.Context(), member, from, func(r engine.AuditRecord) error {
		out = append(out, normalizeRecord(r))
		return nil
	})
	if err != nil {
		t.Fatalf("ScanChain(%s, %d): %v", member, from, err)
	}
	return out
}

func chains(t *testing.T, s *handle) []engine.Chain {
	t.Helper()
	cs, err := s.Chains(t.Context())
	if err != nil {
		t.Fatalf("Chains: %v", err)
	}
	return cs
}

// checkTrimmed checks that member's chain holds all[below-1:] after a trim
// below below, through ScanChain from below it and from inside it.
func checkTrimmed(t *testing.T, s *handle, member string, all []engine.AuditRecord, below uint64) {
	t.Helper()
	if b := chainBase(t, s, member); b != baseOf(all[below-2]) {
		t.Fatalf("ChainBase(%s) after trimming below %d = %+v, want position %d", member, below, b, below-1)
	}
	for _, from := range []uint64{0, below - 1, below} {
		equal(t, "the trimmed chain from "+member, scanChain(t, s, member, from), all[below-1:])
	}
	if mid := scanChain(t, s, member, below+10); len(mid) == 0 || mid[0].Position != below+10 {
		t.Fatalf("ScanChain(%s, %d) after the trim starts at %v", member, below+10, mid)
	}
}

func testChainTrim(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	all, other := trimmedLog(t, a), trimmedLog(t, b)
	if base := chainBase(t, a, "a"); base != (engine.AuditHead{}) {
		t.Fatalf("ChainBase before a trim = %+v, want zero", base)
	}
	if base := chainBase(t, a, "nobody"); base != (engine.AuditHead{}) {
		t.Fatalf("ChainBase of a member without a chain = %+v, want zero", base)
	}
	// Inside a batch, the next record, a batch's first; the second trim
	// through b's handle, as when b took a's chain over.
	for i, below := range []uint64{120, 121, 251} {
		trimChain(t, []*handle{a, b, a}[i], "a", below, baseOf(all[below-2]))
		checkTrimmed(t, b, "a", all, below)
		equal(t, "a's own ScanAudit", scanAudit(t, a, 0), all[below-1:])
	}
	if base := chainBase(t, a, "b"); base != (engine.AuditHead{}) {
		t.Fatalf("b's base after trimming a's chain = %+v, want zero", base)
	}
	equal(t, "b's chain after trimming a's", scanChain(t, a, "b", 0), other)
	equal(t, "b's ScanAudit after trimming a's", scanAudit(t, b, 0), other)
	want := []engine.Chain{{Member: "a", Head: baseOf(all[299])}, {Member: "b", Head: baseOf(other[299])}}
	equal(t, "chain heads after the trims", chains(t, b), want)
	// a's next batches follow its head, by Commit and by Update.
	c := chain{head: baseOf(all[299]), member: "a"}
	commit(t, a, &engine.Batch{Audit: c.records(t, 3)})
	recs := c.records(t, 2)
	update(t, a, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{Audit: recs}, nil })
	if got := scanChain(t, b, "a", 0); len(got) != 55 || got[0].Position != 251 || got[54].Position != 305 {
		t.Fatalf("after two batches on the trimmed chain it holds %d records", len(got))
	}
}

// checkHeadKept checks that s reads member a's chain as trimmed of every
// record up to head: no record, the head everywhere a head is read.
func checkHeadKept(t *testing.T, what string, s *handle, head engine.AuditHead) {
	t.Helper()
	if got := scanChain(t, s, "a", 0); len(got) != 0 {
		t.Fatalf("%s: the chain holds %d records", what, len(got))
	}
	if h, err := s.Head(t.Context()); err != nil || h != head {
		t.Fatalf("%s: Head = %+v, %v; want %+v", what, h, err, head)
	}
	if got := load(t, s).AuditHead; got != head {
		t.Fatalf("%s: Load's AuditHead = %+v, want %+v: a store that lost its commits would look the same", what, got, head)
	}
	equal(t, what+": Chains", chains(t, s), []engine.Chain{{Member: "a", Head: head}})
	if b := chainBase(t, s, "a"); b != head {
		t.Fatalf("%s: ChainBase = %+v, want the head %+v", what, b, head)
	}
}

func testChainTrimAll(t *testing.T, p *place) {
	a := p.handle(t, "a")
	var c chain
	recs := memberRecords(t, &c, "a", 5)
	commit(t, a, &engine.Batch{Audit: recs})
	trimChain(t, a, "a", 6, c.head)
	checkHeadKept(t, "after trimming every record", a, c.head)
	ro := p.handle(t, "")
	equal(t, "a read-only handle's Chains", chains(t, ro), []engine.Chain{{Member: "a", Head: c.head}})
	if p.f.Durable {
		a = p.reopen(t, a)
		checkHeadKept(t, "after reopening", a, c.head)
	}
	// A batch must still follow the head.
	restart := chain{member: "a"}
	skip := c
	skip.records(t, 1)
	for name, bad := range map[string][]engine.AuditRecord{
		"a chain that starts again": restart.records(t, 1), "a hole after the head": skip.records(t, 1),
	} {
		if err := a.Commit(t.Context(), &engine.Batch{Audit: bad}); !errors.Is(err, engine.ErrAuditGap) {
			t.Fatalf("%s on the trimmed chain: Commit = %v, want ErrAuditGap", name, err)
		}
	}
	next := c.records(t, 2)
	update(t, a, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{Audit: next}, nil })
	last := c.records(t, 1)
	commit(t, a, &engine.Batch{Audit: last})
	got := scanChain(t, a, "a", 0)
	equal(t, "the chain after two batches on its head", got, append(next, last...))
	if h, err := a.Head(t.Context()); err != nil || h != c.head {
		t.Fatalf("Head = %+v, %v; want %+v", h, err, c.head)
	}
}

// chainState is what the keeper cases read of each member's chain.
type chainState struct {
	Base    engine.AuditHead
	Records []engine.AuditRecord
}

func readChains(t *testing.T, s *handle, members ...string) map[string]chainState {
	t.Helper()
	out := map[string]chainState{}
	for _, m := range members {
		out[m] = chainState{Base: chainBase(t, s, m), Records: scanChain(t, s, m, 0)}
	}
	return out
}

func testChainTrimRefuses(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	all, other := trimmedLog(t, a), trimmedLog(t, b)
	commit(t, a, &engine.Batch{Quarantine: []engine.QuarantineEntry{quarantineEntry(a.q(250), []byte(`{}`))}})
	commit(t, b, &engine.Batch{Quarantine: []engine.QuarantineEntry{quarantineEntry(b.q(200), []byte(`{}`))}})
	wrong := baseOf(all[98])
	wrong.Hash[0] ^= 1
	cases := []struct {
		name, member string
		below        uint64
		base         engine.AuditHead
		want         error
	}{
		{"a base whose hash is not the stored record's", "a", 100, wrong, engine.ErrTrimBase},
		{"a base that is not the record below the trim", "a", 100, baseOf(all[97]), engine.ErrTrimBase},
		{"a base of another member's chain", "a", 100, baseOf(other[98]), engine.ErrTrimBase},
		{"a base beyond the chain head", "a", 302, engine.AuditHead{Position: 301}, engine.ErrTrimBase},
		{"a member without a chain", "nobody", 2, baseOf(all[0]), engine.ErrTrimBase},
		{"a trim that drops the member's open quarantine entry's record", "a", 252, baseOf(all[250]), engine.ErrTrimQuarantine},
		{"a trim of b's chain, through a's handle, that drops b's open entry's record", "b", 201, baseOf(other[199]), engine.ErrTrimQuarantine},
	}
	before := readChains(t, a, "a", "b")
	for _, tc := range cases {
		if err := keeper(t, a).TrimChain(t.Context(), tc.member, tc.below, tc.base); !errors.Is(err, tc.want) {
			t.Errorf("%s: TrimChain(%s, %d) = %v, want %v", tc.name, tc.member, tc.below, err, tc.want)
		}
	}
	equal(t, "the chains after refused trims", readChains(t, b, "a", "b"), before)
	// b's held record at 200 is no reason to keep a's; b's chain may go up
	// to its held record.
	trimChain(t, a, "a", 202, baseOf(all[200]))
	trimChain(t, a, "b", 200, baseOf(other[198]))
	checkTrimmed(t, b, "b", other, 200)
	if err := keeper(t, a).TrimChain(t.Context(), "a", 150, baseOf(all[148])); !errors.Is(err, engine.ErrTrimBase) {
		t.Fatalf("a trim below the base = %v, want ErrTrimBase", err)
	}
	commit(t, a, &engine.Batch{Resolved: []uint64{a.q(250)}})
	trimChain(t, b, "a", 301, baseOf(all[299]))
	if got := scanChain(t, a, "a", 0); len(got) != 0 {
		t.Fatalf("a chain trimmed to its head still holds %d records", len(got))
	}
}

// testChainTrimClaimed: a handle whose claim of a chain ran out while it
// archived must not trim what the claim's new holder may not have
// archived; a chain no one claims is any handle's to trim.
func testChainTrimClaimed(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	all := trimmedLog(t, a)
	if got := chainClaims.claims(t, a); !slices.Contains(got, "a") {
		t.Fatalf("a claimed %v, want its own chain", got)
	}
	before := readChains(t, b, "a")
	if err := keeper(t, b).TrimChain(t.Context(), "a", 100, baseOf(all[98])); !errors.Is(err, engine.ErrChainClaimed) {
		t.Fatalf("b's trim of the chain a claims = %v, want ErrChainClaimed", err)
	}
	equal(t, "the chain after a refused trim", readChains(t, a, "a"), before)
	trimChain(t, a, "a", 100, baseOf(all[98]))
	chainClaims.release(t, a, "a")
	trimChain(t, b, "a", 200, baseOf(all[198]))
	checkTrimmed(t, a, "a", all, 200)
}

// sinkCursor names a sink's cursor on a member's chain.
type sinkCursor struct{ member, sink string }

// checkCursors checks every cursor of want through s.
func checkCursors(t *testing.T, what string, s *handle, want map[sinkCursor]uint64) {
	t.Helper()
	for c, pos := range want {
		if got, err := keeper(t, s).ChainCursor(t.Context(), c.member, c.sink); err != nil || got != pos {
			t.Fatalf("%s: cursor of %s on %s's chain = %d, %v; want %d", what, c.sink, c.member, got, err, pos)
		}
	}
}

func testChainCursors(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	want := map[sinkCursor]uint64{{"a", "siem"}: 0, {"b", "siem"}: 0, {"a", "otel"}: 0}
	checkCursors(t, "before any was set", a, want)
	for _, set := range []struct {
		by  *handle
		c   sinkCursor
		pos uint64
	}{{a, sinkCursor{"a", "siem"}, 42}, {b, sinkCursor{"b", "siem"}, 7}, {b, sinkCursor{"a", "otel"}, 3}, {a, sinkCursor{"a", "siem"}, 43}} {
		if err := keeper(t, set.by).SetChainCursor(t.Context(), set.c.member, set.c.sink, set.pos); err != nil {
			t.Fatalf("SetChainCursor(%s, %s, %d): %v", set.c.member, set.c.sink, set.pos, err)
		}
	}
	want = map[sinkCursor]uint64{{"a", "siem"}: 43, {"b", "siem"}: 7, {"a", "otel"}: 3, {"b", "otel"}: 0, {"c", "siem"}: 0}
	checkCursors(t, "through a", a, want)
	// A handle whose claim of a's chain ended while it delivered writes
	// the cursor it reached: it cannot take it back from the next.
	if err := keeper(t, b).SetChainCursor(t.Context(), "a", "siem", 40); err != nil {
		t.Fatalf("SetChainCursor below the cursor: %v", err)
	}
	checkCursors(t, "after a cursor set below it", a, want)
	if err := keeper(t, a).SetChainCursor(t.Context(), "c", "siem", 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("SetChainCursor of a member the group never had = %v, want ErrNotFound", err)
	}
	checkCursors(t, "through b", b, want)
	checkCursors(t, "through a read-only handle", p.handle(t, ""), want)
	if p.f.Durable {
		closeStore(t, b)
		a = p.reopen(t, a)
		checkCursors(t, "after reopening", a, want)
	}
}

// testChainCursorsAt: SetChainCursorAt moves a cursor to a record only
// where the chain holds that very record; a batch read before a failover
// to a standby that lacked it cannot save a cursor past the records the
// member decides again there.
func testChainCursorsAt(t *testing.T, p *place) {
	a := p.handle(t, "a")
	c := chain{member: "a"}
	var recs []engine.AuditRecord
	for range 3 { // three batches, so that a record is inside one, another a batch's first
		batch := c.records(t, 4)
		commit(t, a, &engine.Batch{Audit: batch})
		recs = append(recs, batch...)
	}
	k := keeper(t, a)
	at := func(r engine.AuditRecord) engine.AuditHead {
		return engine.AuditHead{Position: r.Position, Hash: r.Hash}
	}
	want := map[sinkCursor]uint64{{"a", "siem"}: 0}
	for _, r := range []engine.AuditRecord{recs[5], recs[4], recs[2]} { // inside a batch, a batch's first, then below
		if err := k.SetChainCursorAt(t.Context(), "a", "siem", at(r)); err != nil {
			t.Fatalf("SetChainCursorAt(%d): %v", r.Position, err)
		}
		want[sinkCursor{"a", "siem"}] = max(want[sinkCursor{"a", "siem"}], r.Position)
		checkCursors(t, fmt.Sprintf("at the chain's record %d", r.Position), a, want)
	}
	other := at(recs[9])
	other.Hash = recs[8].Hash
	past := engine.AuditHead{Position: 13, Hash: recs[11].Hash}
	for _, bad := range []engine.AuditHead{other, past} {
		if err := k.SetChainCursorAt(t.Context(), "a", "siem", bad); !errors.Is(err, engine.ErrCursorRecord) {
			t.Fatalf("SetChainCursorAt(%d, a hash the chain does not hold there) = %v, want ErrCursorRecord", bad.Position, err)
		}
		checkCursors(t, fmt.Sprintf("after a refused cursor at %d", bad.Position), a, want)
	}
	if err := k.SetChainCursorAt(t.Context(), "c", "siem", at(recs[0])); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("SetChainCursorAt of a member the group never had = %v, want ErrNotFound", err)
	}
}

func testChainCursorsForgotten(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	for _, set := range []struct {
		c   sinkCursor
		pos uint64
	}{{sinkCursor{"a", "siem"}, 42}, {sinkCursor{"b", "siem"}, 7}, {sinkCursor{"a", "otel"}, 3}} {
		if err := keeper(t, a).SetChainCursor(t.Context(), set.c.member, set.c.sink, set.pos); err != nil {
			t.Fatalf("SetChainCursor(%s, %s, %d): %v", set.c.member, set.c.sink, set.pos, err)
		}
	}
	checkAll := func(what string, s *handle, want map[string]map[string]uint64) {
		t.Helper()
		for _, m := range []string{"a", "b", "c"} {
			got, err := keeper(t, s).ChainCursors(t.Context(), m)
			if err != nil || !maps.Equal(got, want[m]) {
				t.Fatalf("%s: ChainCursors(%s) = %v, %v; want %v", what, m, got, err, want[m])
			}
		}
	}
	checkAll("through b", b, map[string]map[string]uint64{"a": {"siem": 42, "otel": 3}, "b": {"siem": 7}})
	checkAll("through a read-only handle", p.handle(t, ""), map[string]map[string]uint64{"a": {"siem": 42, "otel": 3}, "b": {"siem": 7}})
	if got, err := keeper(t, b).ForgetSink(t.Context(), "siem"); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ForgetSink(siem) = %v, %v; want the chains of a and b", got, err)
	}
	checkAll("after forgetting siem", a, map[string]map[string]uint64{"a": {"otel": 3}})
	if got, err := keeper(t, b).ForgetSink(t.Context(), "siem"); err != nil || len(got) != 0 {
		t.Fatalf("ForgetSink(siem) again = %v, %v; want none", got, err)
	}
	if _, err := keeper(t, p.handle(t, "")).ForgetSink(t.Context(), "otel"); err == nil {
		t.Fatal("ForgetSink through a read-only handle succeeded")
	}
	if p.f.Durable {
		closeStore(t, b)
		a = p.reopen(t, a)
		checkAll("after reopening", a, map[string]map[string]uint64{"a": {"otel": 3}})
	}
}

func testChainQuarantineBases(t *testing.T, p *place) {
	want := map[string]uint64{}
	var hs []*handle
	for _, m := range []string{"a", "b", "c"} {
		hs = append(hs, p.handle(t, m))
		want[m] = hs[len(hs)-1].QuarantineBase()
	}
	closeStore(t, hs[2]) // a member that left keeps its base
	for _, s := range []*handle{p.handle(t, ""), hs[0]} {
		got, err := keeper(t, s).QuarantineBases(t.Context())
		if err != nil {
			t.Fatalf("QuarantineBases: %v", err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("QuarantineBases through %q = %v, want %v", s.member, got, want)
		}
	}
}

func testChainReadOnly(t *testing.T, p *place) {
	a := p.handle(t, "a")
	var c chain
	recs := memberRecords(t, &c, "a", 3)
	commit(t, a, &engine.Batch{Audit: recs})
	trimChain(t, a, "a", 2, baseOf(recs[0]))
	if err := keeper(t, a).SetChainCursor(t.Context(), "a", "siem", 2); err != nil {
		t.Fatal(err)
	}
	ro := p.handle(t, "")
	k := keeper(t, ro)
	before := readChains(t, ro, "a")
	if before["a"].Base != baseOf(recs[0]) || len(before["a"].Records) != 2 {
		t.Fatalf("a read-only handle reads a's chain as %+v", before["a"])
	}
	checkCursors(t, "through a read-only handle", ro, map[sinkCursor]uint64{{"a", "siem"}: 2})
	ctx := t.Context()
	for name, err := range map[string]error{
		"TrimChain":      k.TrimChain(ctx, "a", 3, baseOf(recs[1])),
		"SetChainCursor": k.SetChainCursor(ctx, "a", "siem", 3),
		"ClaimChains":    func() error { _, err := k.ClaimChains(ctx); return err }(),
		"ReleaseChain":   k.ReleaseChain(ctx, "a"),
	} {
		if err == nil {
			t.Errorf("a read-only handle's %s succeeded", name)
		}
	}
	equal(t, "a's chain after the read-only handle's writes", readChains(t, a, "a"), before)
	checkCursors(t, "after the read-only handle's writes", a, map[sinkCursor]uint64{{"a", "siem"}: 2})
}

func testChainClosed(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	k := keeper(t, s)
	closeStore(t, s)
	ctx := t.Context()
	for name, err := range map[string]error{
		"ChainBase":       func() error { _, err := k.ChainBase(ctx, "m1"); return err }(),
		"TrimChain":       k.TrimChain(ctx, "m1", 2, engine.AuditHead{Position: 1}),
		"ChainCursor":     func() error { _, err := k.ChainCursor(ctx, "m1", "siem"); return err }(),
		"SetChainCursor":  k.SetChainCursor(ctx, "m1", "siem", 1),
		"QuarantineBases": func() error { _, err := k.QuarantineBases(ctx); return err }(),
		"ClaimChains":     func() error { _, err := k.ClaimChains(ctx); return err }(),
		"ReleaseChain":    k.ReleaseChain(ctx, "m1"),
	} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// testChainTrimScans trims a chain, a little at a time, while another
// handle scans it again and again: no scan fails, and each reads records
// in order up to the head, the chain's links intact wherever a trim did not
// end the records it was reading.
func testChainTrimScans(t *testing.T, p *place) {
	a := p.handle(t, "a")
	c := a.chain()
	var all []engine.AuditRecord
	for range 100 {
		recs := c.records(t, 5)
		commit(t, a, &engine.Batch{Audit: recs})
		all = append(all, recs...)
	}
	ro := p.handle(t, "")
	k := keeper(t, a)
	trims := make(chan error, 1)
	go func() {
		for below := uint64(7); below < uint64(len(all)); below += 7 {
			if err := k.TrimChain(t.Context(), "a", below, baseOf(all[below-2])); err != nil {
				trims <- fmt.Errorf("TrimChain(%d): %w", below, err)
				return
			}
		}
		trims <- nil
	}()
	for scans := 0; ; scans++ {
		select {
		case err := <-trims:
			if err != nil {
				t.Fatal(err)
			}
			if got := scanChain(t, ro, "a", 0); len(got) != 4 || got[0].Prev != all[len(all)-5].Hash {
				t.Fatalf("after the trims the chain holds %d records", len(got))
			}
			t.Logf("%d scans while trimming", scans)
			return
		default:
		}
		checkScan(t, scanChain(t, ro, "a", 0), c.head)
	}
}

// checkScan checks that got ascends to head, each record linked to the one
// before it when it follows it.
func checkScan(t *testing.T, got []engine.AuditRecord, head engine.AuditHead) {
	t.Helper()
	if len(got) == 0 || baseOf(got[len(got)-1]) != head {
		t.Fatalf("a scan while trimming read %d records, not up to the head", len(got))
	}
	for i := 1; i < len(got); i++ {
		prev, r := got[i-1], got[i]
		if r.Position <= prev.Position || (r.Position == prev.Position+1 && r.Prev != prev.Hash) {
			t.Fatalf("a scan while trimming read position %d after %d", r.Position, prev.Position)
		}
	}
}

// testChainTrimmedEngine starts an engine on a member whose chain was
// trimmed of every record: it finds its head, goes on after it, and still
// knows its messages.
func testChainTrimmedEngine(t *testing.T, p *place) {
	a := p.handle(t, "a")
	meters := engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId"}
	msg := func(id string) engine.Message {
		return engine.Message{Topic: "plant/m-1/energy", Payload: fmt.Appendf(nil, `{"msgId":%q,"kwh":1}`, id)}
	}
	run := func(msgs ...engine.Message) []engine.Decision {
		t.Helper()
		e, err := engine.New(t.Context(), a.Store, engine.Options{Routes: []engine.Route{meters}, TTL: time.Hour})
		if err != nil {
			t.Fatalf("engine on the trimmed chain: %v", err)
		}
		defer e.Close()
		ds, err := e.Process(t.Context(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	run(msg("r-1"), msg("r-2"), msg("r-3"))
	head, err := a.Head(t.Context())
	if err != nil || head.Position != 3 {
		t.Fatalf("head after three messages = %+v, %v", head, err)
	}
	trimChain(t, a, "a", head.Position+1, head)
	ds := run(msg("r-4"), msg("r-1"))
	if ds[0].Outcome != engine.Applied || ds[0].Position != 4 || ds[1].Outcome != engine.Duplicate {
		t.Fatalf("after the trim the engine decided %v at %d and %v", ds[0].Outcome, ds[0].Position, ds[1].Outcome)
	}
	if got := scanChain(t, a, "a", 0); len(got) != 2 || got[0].Prev != head.Hash {
		t.Fatalf("the chain after the trim holds %d records, not two linked to the head %s", len(got), head.Hash)
	}
}
