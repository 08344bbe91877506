package storetest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/replayguard/replayguard/engine"
)

// The cases at the edges of what a store is handed: names as long and as
// strange as the engine lets through, empty batches, a key at the edge of
// its window, a log trimmed of every record, a handle closed while it
// writes.

// identityBytes is the longest source part and entity name the engine
// lets through, sourceBytes the longest parts of a source together, and
// routeBytes the longest route name: longer ones are malformed, or refused
// as configuration, before they reach a store.
const (
	identityBytes = engine.MaxIdentityBytes
	sourceBytes   = engine.MaxSourceBytes
	routeBytes    = 64
)

// oddText returns text of exactly n bytes, valid UTF-8, that does not
// compress: runes of one to four bytes drawn at random, among them NUL,
// separators and the characters key schemes and hash tags give meaning to.
func oddText(rng *rand.Rand, n int) string {
	specials := []rune{0, '|', ':', '{', '}', '/', '\n', '\\', '"', '%', '*', '\'', 0x7f}
	var b strings.Builder
	for b.Len() < n {
		var r rune
		switch rng.IntN(6) {
		case 0:
			r = specials[rng.IntN(len(specials))]
		case 1:
			r = rune(0x20 + rng.IntN(0x5f))
		case 2:
			r = rune(0xa0 + rng.IntN(0x700)) // two bytes
		case 3, 4:
			r = rune(0x4e00 + rng.IntN(0x5000)) // three bytes
		default:
			r = rune(0x1f300 + rng.IntN(0x700)) // four bytes
		}
		if b.Len()+utf8.RuneLen(r) > n {
			r = rune(0x20 + rng.IntN(0x5f))
		}
		b.WriteRune(r)
	}
	return b.String()
}

// oddRows are source windows and entities whose identities are as long as
// the engine allows and made of what a payload may hold: the longest route
// name with source fields of the longest text each, or three that are as
// long together, NUL bytes, separators, braces, every byte length of rune.
func oddRows() ([]engine.SourceState, []engine.EntityState) {
	rng := rand.New(rand.NewPCG(7, 11))
	long := func() string { return oddText(rng, identityBytes) }
	third := sourceBytes / 3
	route := strings.Repeat("r", routeBytes)
	sources := []engine.SourceState{
		sourceState(route, []string{oddText(rng, third), oddText(rng, third), oddText(rng, sourceBytes-2*third)}, 1),
		sourceState(route, []string{long(), long()}, 2),
		sourceState("métriques-电表", []string{"\x00", "", "{tag}"}, 3),
		sourceState("métriques-电表", []string{"\x00", "{tag}", ""}, 4),
		sourceState("r", []string{"a:b", "c\x00d", "🙂"}, 5),
	}
	entities := []engine.EntityState{
		entityState("incident/"+oddText(rng, identityBytes-len("incident/")), 1),
		entityState(oddText(rng, identityBytes), 2),
		entityState("\x00", 3),
		entityState("meter/{plant-1}:a|b", 4),
		entityState("meter/{plant-1}:a", 5),
		entityState("ünit/🚒", 6),
	}
	return sources, entities
}

// testOddNames: rows named as long and as strangely as the engine lets
// through are stored, read and scanned back each under its own identity.
func testOddNames(t *testing.T, s *handle) {
	sources, entities := oddRows()
	if err := s.Commit(t.Context(), &engine.Batch{Sources: sources, Entities: entities}); err != nil {
		t.Fatalf("Commit of rows with the longest identities the engine lets through: %v", err)
	}
	want := normalize(&engine.Snapshot{Sources: sources, Entities: entities})
	got := normalize(load(t, s))
	equal(t, "sources loaded", got.Sources, want.Sources)
	equal(t, "entities loaded", got.Entities, want.Entities)
	if s.shared() {
		r := &engine.Reads{}
		for _, src := range sources {
			r.Sources = append(r.Sources, src.ID())
		}
		for _, e := range entities {
			r.Entities = append(r.Entities, e.Name)
		}
		slices.Sort(r.Sources)
		slices.Sort(r.Entities)
		var read *engine.Rows
		update(t, s, r, func(rows *engine.Rows) (*engine.Batch, error) {
			read = rows
			return &engine.Batch{}, nil
		})
		rows := normalize(&engine.Snapshot{Sources: read.Sources, Entities: read.Entities})
		equal(t, "sources read by Update", rows.Sources, want.Sources)
		equal(t, "entities read by Update", rows.Entities, want.Entities)
	}
	if rr := s.caps.Rows; rr != nil {
		tx, err := rr.ReadRows(t.Context())
		if err != nil {
			t.Fatalf("ReadRows: %v", err)
		}
		defer tx.Close()
		for _, want := range sources {
			got, found, err := tx.Source(want.ID())
			if err != nil || !found {
				t.Fatalf("Source(%q) = found %v, %v", want.ID()[:min(40, len(want.ID()))], found, err)
			}
			equal(t, "source read", normalize(&engine.Snapshot{Sources: []engine.SourceState{got}}).Sources,
				normalize(&engine.Snapshot{Sources: []engine.SourceState{want}}).Sources)
		}
		for _, want := range entities {
			got, found, err := tx.Entity(want.Name)
			if err != nil || !found {
				t.Fatalf("Entity(%q) = found %v, %v", want.Name[:min(40, len(want.Name))], found, err)
			}
			equal(t, "entity read", got, want)
		}
		tx.Close()
	}
	sc := s.caps.Scan
	if sc == nil && s.caps.Rows != nil {
		sc = s.caps.Rows
	}
	if sc == nil {
		return
	}
	var scanned engine.Snapshot
	if err := sc.ScanSources(t.Context(), func(src engine.SourceState) error {
		scanned.Sources = append(scanned.Sources, src)
		return nil
	}); err != nil {
		t.Fatalf("ScanSources: %v", err)
	}
	if err := sc.ScanEntities(t.Context(), func(e engine.EntityState) error {
		scanned.Entities = append(scanned.Entities, e)
		return nil
	}); err != nil {
		t.Fatalf("ScanEntities: %v", err)
	}
	if !slices.IsSortedFunc(scanned.Entities, func(a, b engine.EntityState) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("ScanEntities out of name order (strings.Compare)")
	}
	equal(t, "sources scanned", normalize(&scanned).Sources, want.Sources)
	equal(t, "entities scanned", normalize(&scanned).Entities, want.Entities)
	if ns, ne, err := sc.CountRows(t.Context()); err != nil || ns != len(sources) || ne != len(entities) {
		t.Errorf("CountRows = %d, %d, %v; want %d, %d", ns, ne, err, len(sources), len(entities))
	}
}

// testEmptyBatch: a batch that writes nothing changes nothing, by Commit
// and, on a group's store, by Update: no chain appears for the member, the
// head stays where it was.
func testEmptyBatch(t *testing.T, s *handle) {
	nothing := func() {
		t.Helper()
		commit(t, s, &engine.Batch{})
		commit(t, s, &engine.Batch{Audit: []engine.AuditRecord{}, Keys: []engine.KeyEntry{}, Resolved: []uint64{}})
		if s.shared() {
			update(t, s, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil })
			update(t, s, &engine.Reads{Keys: []engine.Hash{keyHash(1)}, Sources: []string{engine.SourceID("r", []string{"a"})},
				Entities: []string{"e"}}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil })
		}
	}
	nothing()
	equal(t, "state after empty batches on a new store", readState(t, s), state{Snap: &engine.Snapshot{}})
	c := s.chain()
	b := s.fullBatch(t, &c, 1)
	commit(t, s, b)
	before := readState(t, s)
	nothing()
	equal(t, "state after empty batches", readState(t, s), before)
	if s.shared() {
		if h, err := s.Head(t.Context()); err != nil || h != c.head {
			t.Fatalf("Head after empty batches = %+v, %v; want %+v", h, err, c.head)
		}
	}
	// The next records still follow the head.
	commit(t, s, &engine.Batch{Audit: c.records(t, 1)})
	if got := load(t, s).AuditHead; got != c.head {
		t.Fatalf("head after a batch following empty ones = %+v, want %+v", got, c.head)
	}
}

// testTrimAll: a log trimmed of every record keeps its head: Load and
// AuditBase return it, across a reopen when the store is durable, and the
// next batch must follow it. A store that lost its head here would take a
// chain that starts again, and look like a store that lost its commits.
func testTrimAll(t *testing.T, p *place) {
	s := p.first(t)
	c := s.chain()
	commit(t, s, &engine.Batch{Audit: c.records(t, 5)})
	if err := s.caps.Trim.TrimAudit(t.Context(), 6, c.head); err != nil {
		t.Fatalf("TrimAudit of every record: %v", err)
	}
	check := func(what string) {
		t.Helper()
		if got := scanAudit(t, s, 0); len(got) != 0 {
			t.Fatalf("%s: the log holds %d records", what, len(got))
		}
		if got := load(t, s).AuditHead; got != c.head {
			t.Fatalf("%s: Load's AuditHead = %+v, want %+v", what, got, c.head)
		}
		if b, err := s.caps.Trim.AuditBase(t.Context()); err != nil || b != c.head {
			t.Fatalf("%s: AuditBase = %+v, %v; want the head %+v", what, b, err, c.head)
		}
		if rr := s.caps.Rows; rr != nil {
			snap, err := rr.LoadKeys(t.Context())
			if err != nil || snap.AuditHead != c.head {
				t.Fatalf("%s: LoadKeys' AuditHead = %+v, %v; want %+v", what, snap, err, c.head)
			}
		}
	}
	check("after trimming every record")
	if p.f.Durable {
		s = p.reopen(t, s)
		check("after reopening")
	}
	restart := s.chain()
	skip := c
	skip.records(t, 1)
	for name, bad := range map[string][]engine.AuditRecord{
		"a chain that starts again": restart.records(t, 1), "a hole after the head": skip.records(t, 1),
	} {
		if err := s.Commit(t.Context(), &engine.Batch{Audit: bad}); !errors.Is(err, engine.ErrAuditGap) {
			t.Fatalf("%s on the trimmed log: Commit = %v, want ErrAuditGap", name, err)
		}
	}
	next := c.records(t, 2)
	commit(t, s, &engine.Batch{Audit: next})
	equal(t, "the log after a batch on its head", scanAudit(t, s, 0), next)
	if got := load(t, s).AuditHead; got != c.head {
		t.Fatalf("head = %+v, want %+v", got, c.head)
	}
}

// testCloseWhileCommitting: Close while commits run. Every Commit that
// returned nil is in the log, in order, and none that failed is, after a
// reopen when the store is durable; Close returns; commits after it fail.
func testCloseWhileCommitting(t *testing.T, p *place) {
	s := p.first(t)
	c := s.chain()
	const n = 200
	batches := make([][]engine.AuditRecord, n)
	for i := range batches {
		batches[i] = c.records(t, 3)
	}
	results := make([]error, n)
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range batches {
			if i == 5 {
				close(started)
			}
			results[i] = s.Commit(t.Context(), &engine.Batch{Audit: batches[i],
				Entities: []engine.EntityState{entityState("incident/7", int64(i))}})
		}
	})
	<-started
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close while committing: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close while committing did not return in 20s")
	}
	wg.Wait()
	var want []engine.AuditRecord
	failed := false
	for i, err := range results {
		switch {
		case err == nil && failed:
			t.Fatalf("Commit %d returned nil after an earlier one failed: %v", i, results)
		case err == nil:
			want = append(want, batches[i]...)
		default:
			failed = true
		}
	}
	if !failed {
		t.Logf("every commit landed before Close")
	}
	if err := s.Commit(t.Context(), &engine.Batch{Audit: c.records(t, 1)}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Commit after Close returned = %v, want ErrClosed", err)
	}
	if !p.f.Durable {
		return
	}
	s = p.handle(t, s.member)
	got := scanAudit(t, s, 0)
	if len(got) != len(want) {
		last := uint64(0)
		if len(got) > 0 {
			last = got[len(got)-1].Position
		}
		t.Fatalf("after reopening the log holds %d records up to %d; the commits that returned nil wrote %d", len(got), last, len(want))
	}
	equal(t, "the log after reopening", got, want)
	head := engine.AuditHead{}
	if len(want) > 0 {
		head = baseOf(want[len(want)-1])
	}
	if h := load(t, s).AuditHead; h != head {
		t.Fatalf("head after reopening = %+v, want %+v", h, head)
	}
}

// testSharedCloseWhileUpdating: Close while an Update decides. Close
// returns; the Update either returns nil and its batch is in the store, or
// fails and nothing of it is, as the member's next handle reads it.
func testSharedCloseWhileUpdating(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	var c chain
	commit(t, s, &engine.Batch{Audit: memberRecords(t, &c, "m1", 1)})
	before := c.head
	recs := memberRecords(t, &c, "m1", 2)
	deciding := make(chan struct{})
	var once sync.Once
	updated := make(chan error, 1)
	go func() {
		updated <- s.Update(t.Context(), &engine.Reads{Keys: []engine.Hash{keyHash(1)}, Entities: []string{"incident/7"}},
			func(*engine.Rows) (*engine.Batch, error) {
				once.Do(func() { close(deciding) })
				time.Sleep(300 * time.Millisecond) // Close runs meanwhile
				return &engine.Batch{Audit: recs, Keys: []engine.KeyEntry{sharedKey(1)},
					Entities: []engine.EntityState{entityState("incident/7", 9)}}, nil
			})
	}()
	<-deciding
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	var uerr error
	for range 2 {
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("Close while updating: %v", err)
			}
			closed = nil
		case uerr = <-updated:
			updated = nil
		case <-time.After(20 * time.Second):
			t.Fatalf("Close while updating: Close done %v, Update done %v after 20s", closed == nil, updated == nil)
		}
	}
	var again *handle
	for deadline := time.Now().Add(10 * time.Second); ; {
		h, err := p.open("m1")
		if err == nil {
			again = &handle{Store: h, p: p, caps: h.Capabilities(), member: "m1", qbase: h.Capabilities().Shared.QuarantineBase()}
			break
		}
		if !errors.Is(err, engine.ErrMemberHeld) || time.Now().After(deadline) {
			t.Fatalf("reopening m1 after Close: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	head, err := again.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stored := again.storedKeys(t, 1, 1)
	ents := load(t, again).Entities
	switch {
	case uerr == nil:
		if head != c.head || len(stored) != 1 || len(ents) != 1 {
			t.Fatalf("Update returned nil but the store holds head %d, %d keys, %d entities", head.Position, len(stored), len(ents))
		}
	default:
		t.Logf("Update while closing: %v", uerr)
		if head != before || len(stored) != 0 || len(ents) != 0 {
			t.Fatalf("Update failed (%v) but the store holds head %d (was %d), %d keys, %d entities",
				uerr, head.Position, before.Position, len(stored), len(ents))
		}
	}
	if got := scanChain(t, again, "m1", 0); len(got) != int(head.Position) {
		t.Fatalf("m1's chain holds %d records up to head %d", len(got), head.Position)
	}
}

// testSharedKeyCutoff: a key applied at Reads.KeyCutoff is live, one
// applied a nanosecond before it has expired. Update hands decide both;
// an expired key may be replaced by the batch (its message applies again),
// a live one is never overwritten, whatever decide returns.
func testSharedKeyCutoff(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	at := time.Now().UnixNano()
	stored := func(n uint64) engine.KeyEntry {
		return engine.KeyEntry{Ordinal: n, Key: keyHash(n), Digest: keyHash(n + 7), Time: at}
	}
	commit(t, s, &engine.Batch{Keys: []engine.KeyEntry{stored(1), stored(2)}})
	both := sortedKeys(keyHash(1), keyHash(2))
	readKeys := func(cutoff int64) map[engine.Hash]engine.KeyEntry {
		t.Helper()
		out := map[engine.Hash]engine.KeyEntry{}
		update(t, s, &engine.Reads{Keys: both, KeyCutoff: cutoff}, func(rows *engine.Rows) (*engine.Batch, error) {
			for _, k := range rows.Keys {
				out[k.Key] = k
			}
			return &engine.Batch{}, nil
		})
		return out
	}
	// At the cutoff: both are handed to decide, as stored.
	got := readKeys(at)
	for _, n := range []uint64{1, 2} {
		if got[keyHash(n)] != stored(n) {
			t.Fatalf("key %d applied at the cutoff: Update read %+v, want %+v", n, got[keyHash(n)], stored(n))
		}
	}
	// A nanosecond past it, key 1 has expired: a batch replaces it.
	replaced := engine.KeyEntry{Ordinal: 11, Key: keyHash(1), Digest: keyHash(99), Time: at + 10}
	calls := 0
	update(t, s, &engine.Reads{Keys: both, KeyCutoff: at + 1}, func(*engine.Rows) (*engine.Batch, error) {
		calls++
		return &engine.Batch{Keys: []engine.KeyEntry{replaced}}, nil
	})
	if got := readKeys(0)[keyHash(1)]; got != replaced {
		t.Fatalf("an expired key written again by a batch: stored %+v, want %+v (decide called %d times)", got, replaced, calls)
	}
	// Key 2 is live at its own time: a batch that writes it anyway does
	// not overwrite it, whether the store refuses the batch or decides it
	// again.
	calls = 0
	err := s.Update(t.Context(), &engine.Reads{Keys: both, KeyCutoff: at}, func(*engine.Rows) (*engine.Batch, error) {
		calls++
		return &engine.Batch{Keys: []engine.KeyEntry{{Ordinal: 12, Key: keyHash(2), Digest: keyHash(98), Time: at + 20}}}, nil
	})
	t.Logf("a batch overwriting a live key: Update = %v after %d calls of decide", err, calls)
	if got := readKeys(0)[keyHash(2)]; got != stored(2) {
		t.Fatalf("a key live at the cutoff was overwritten: stored %+v, want %+v", got, stored(2))
	}
}

func sortedKeys(ks ...engine.Hash) []engine.Hash {
	slices.SortFunc(ks, func(a, b engine.Hash) int { return bytes.Compare(a[:], b[:]) })
	return ks
}

// testOutboxDoneHeld: a drainer that delivered an entry another one held
// meanwhile marks it done; the held entry stays held, for an operator.
func testOutboxDoneHeld(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	all := threeBatches(t, h)
	wantHeld := holdTwo(t, h, all)
	done(t, o, h.member, all[1].ID, all[3].ID)
	equalHeld(t, "held after done of their ids", held(t, o), wantHeld)
	h.commit(t, &engine.Batch{Audit: h.records(t, 1), OutboxResolved: []engine.OutboxResolve{{Member: h.member, ID: all[1].ID, Requeue: true}}})
	want := append([]engine.OutboxEntry{all[0], all[1], all[2]}, all[4:]...)
	equalEntries(t, "pending after the retry", pending(t, o, h.member), want)
}

// oddSinks are sink names a configuration may hold: separators, braces,
// every byte length of rune. Each names a cursor of its own.
var oddSinks = []string{"siem", "siem:eu/1", "siem:eu", "otel{x}", "ünïcode 🚀", "a|b", "файл"}

// testOddCursorNames: each sink's cursor is kept under its own name,
// however it is spelt.
func testOddCursorNames(t *testing.T, p *place) {
	s := p.first(t)
	cs := s.caps.Cursors
	for i, name := range oddSinks {
		if err := cs.SetCursor(t.Context(), name, uint64(10+i)); err != nil {
			t.Fatalf("SetCursor(%q): %v", name, err)
		}
	}
	check := func(what string, cs engine.CursorStore) {
		t.Helper()
		for i, name := range oddSinks {
			if got, err := cs.Cursor(t.Context(), name); err != nil || got != uint64(10+i) {
				t.Fatalf("%s: cursor of %q = %d, %v; want %d", what, name, got, err, 10+i)
			}
		}
	}
	check("after SetCursor", cs)
	if p.f.Durable {
		s = p.reopen(t, s)
		check("after reopening", s.caps.Cursors)
	}
}

// testChainOddCursorNames: each sink's cursor on a member's chain is kept
// under its own name, however it is spelt.
func testChainOddCursorNames(t *testing.T, p *place) {
	a := p.handle(t, "a")
	var c chain
	commit(t, a, &engine.Batch{Audit: memberRecords(t, &c, "a", 1)})
	for i, name := range oddSinks {
		if err := keeper(t, a).SetChainCursor(t.Context(), "a", name, uint64(10+i)); err != nil {
			t.Fatalf("SetChainCursor(a, %q): %v", name, err)
		}
	}
	want := map[sinkCursor]uint64{}
	for i, name := range oddSinks {
		want[sinkCursor{"a", name}] = uint64(10 + i)
	}
	checkCursors(t, "through a", a, want)
	checkCursors(t, "through a read-only handle", p.handle(t, ""), want)
}
