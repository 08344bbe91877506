package storetest

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// Backend is what every store implements: the engine's Store and both scanners.
type Backend interface {
	engine.Store
	engine.AuditScanner
	engine.QuarantineScanner
}

// Run runs the conformance suite. open returns a new, empty store for each
// subtest and should register a t.Cleanup that closes it (ignoring the
// error: some subtests close it themselves).
func Run(t *testing.T, open func(t *testing.T) engine.Store) {
	t.Helper()
	backend := func(t *testing.T) Backend {
		t.Helper()
		s := open(t)
		b, ok := s.(Backend)
		if !ok {
			t.Fatalf("%T does not implement engine.AuditScanner and engine.QuarantineScanner", s)
		}
		return b
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s Backend)
	}{
		{"a new store loads empty", testEmpty},
		{"load returns what commit wrote", testRoundTrip},
		{"keys come back in ordinal order across batches", testKeyOrder},
		{"sources are upserted by route and source identity", testSourceUpsert},
		{"entities are upserted by name", testEntityUpsert},
		{"the audit head is the last record written", testAuditHead},
		{"next key never goes backwards", testNextKey},
		{"evict below deletes older key entries", testEvict},
		{"an audit gap fails the whole batch", testAuditGap},
		{"a cancelled context writes nothing", testCancelled},
		{"scan audit starts at a position and keeps order", testScanAudit},
		{"scan audit stops at the first callback error", testScanAuditStops},
		{"quarantine lists open entries in id order", testQuarantineList},
		{"resolved entries leave the quarantine", testQuarantineResolve},
		{"an unknown quarantine id is not found", testQuarantineUnknown},
		{"scan quarantine stops at the first callback error", testScanQuarantineStops},
		{"payload bytes round-trip exactly", testPayloads},
		{"the store keeps its own copies", testCopies},
		{"every method returns ErrClosed after close", testClosed},
		{"scans run safely while commits land", testConcurrent},
		{"a trimmed audit log starts after its base", testTrim},
		{"a trim that would break the chain or drop a held record is refused", testTrimRefuses},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, backend(t)) })
	}
}

// state is everything a store holds, for before/after comparisons.
type state struct {
	Snap       *engine.Snapshot
	Audit      []engine.AuditRecord
	Quarantine []engine.QuarantineEntry
}

func readState(t *testing.T, s Backend) state {
	t.Helper()
	return state{Snap: normalize(load(t, s)), Audit: scanAudit(t, s, 0), Quarantine: scanQuarantine(t, s)}
}

func load(t *testing.T, s Backend) *engine.Snapshot {
	t.Helper()
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if snap == nil {
		t.Fatal("Load returned a nil snapshot")
	}
	return snap
}

func commit(t *testing.T, s Backend, b *engine.Batch) {
	t.Helper()
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func scanAudit(t *testing.T, s Backend, from uint64) []engine.AuditRecord {
	t.Helper()
	var out []engine.AuditRecord
	err := s.ScanAudit(t.Context(), from, func(r engine.AuditRecord) error {
		out = append(out, normalizeRecord(r))
		return nil
	})
	if err != nil {
		t.Fatalf("ScanAudit(%d): %v", from, err)
	}
	return out
}

func scanQuarantine(t *testing.T, s Backend) []engine.QuarantineEntry {
	t.Helper()
	var out []engine.QuarantineEntry
	err := s.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		out = append(out, normalizeEntry(q))
		return nil
	})
	if err != nil {
		t.Fatalf("ScanQuarantine: %v", err)
	}
	return out
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func testEmpty(t *testing.T, s Backend) {
	equal(t, "empty snapshot", normalize(load(t, s)), &engine.Snapshot{})
	if got := scanAudit(t, s, 0); len(got) != 0 {
		t.Errorf("ScanAudit on an empty store returned %d records", len(got))
	}
	if got := scanQuarantine(t, s); len(got) != 0 {
		t.Errorf("ScanQuarantine on an empty store returned %d entries", len(got))
	}
}

// fullBatch writes a little of everything, following c.
func fullBatch(t *testing.T, c *chain, firstKey uint64) *engine.Batch {
	recs := c.records(t, 4)
	return &engine.Batch{
		Keys:    keyEntries(firstKey, firstKey+2),
		NextKey: firstKey + 3,
		Sources: []engine.SourceState{
			sourceState("incidents", []string{"agency-1", "dev-1"}, 1),
			sourceState("meters", []string{"meter-3"}, 2),
			sparkplugSource(),
		},
		Entities:   []engine.EntityState{entityState("incident/7", 1), entityState("unit/12", 2)},
		Audit:      recs,
		Quarantine: []engine.QuarantineEntry{quarantineEntry(recs[1].Position, []byte(`{"kwh":0.5}`))},
	}
}

func testRoundTrip(t *testing.T, s Backend) {
	var c chain
	b := fullBatch(t, &c, 1)
	commit(t, s, b)
	want := normalize(&engine.Snapshot{
		Keys: b.Keys, Sources: b.Sources, Entities: b.Entities, AuditHead: c.head, NextKey: b.NextKey,
	})
	equal(t, "snapshot", normalize(load(t, s)), want)
	equal(t, "audit", scanAudit(t, s, 0), b.Audit)
	equal(t, "quarantine", scanQuarantine(t, s), b.Quarantine)
}

func testKeyOrder(t *testing.T, s Backend) {
	commit(t, s, &engine.Batch{Keys: keyEntries(1, 5), NextKey: 6})
	commit(t, s, &engine.Batch{Keys: keyEntries(6, 6), NextKey: 7})
	commit(t, s, &engine.Batch{Keys: keyEntries(7, 300), NextKey: 301})
	equal(t, "keys", load(t, s).Keys, keyEntries(1, 300))
}

func testSourceUpsert(t *testing.T, s Backend) {
	// Parts that a delimiter join would confuse are distinct sources.
	a := sourceState("r", []string{"a|b", "c"}, 1)
	b := sourceState("r", []string{"a", "b|c"}, 1)
	other := sourceState("r2", []string{"a|b", "c"}, 1)
	commit(t, s, &engine.Batch{Sources: []engine.SourceState{a, b, other}})
	a2 := sourceState("r", []string{"a|b", "c"}, 2)
	commit(t, s, &engine.Batch{Sources: []engine.SourceState{a2}})
	want := normalize(&engine.Snapshot{Sources: []engine.SourceState{a2, b, other}})
	equal(t, "sources", normalize(load(t, s)).Sources, want.Sources)
}

func testEntityUpsert(t *testing.T, s Backend) {
	commit(t, s, &engine.Batch{Entities: []engine.EntityState{entityState("incident/7", 1), entityState("unit/12", 1)}})
	commit(t, s, &engine.Batch{Entities: []engine.EntityState{entityState("incident/7", 5)}})
	want := []engine.EntityState{entityState("incident/7", 5), entityState("unit/12", 1)}
	equal(t, "entities", normalize(load(t, s)).Entities, want)
}

func testAuditHead(t *testing.T, s Backend) {
	var c chain
	commit(t, s, &engine.Batch{Audit: c.records(t, 3)})
	equal(t, "head after one batch", load(t, s).AuditHead, c.head)
	commit(t, s, &engine.Batch{Audit: c.records(t, 1)})
	commit(t, s, &engine.Batch{Keys: keyEntries(1, 1), NextKey: 2}) // no records: head stays
	equal(t, "head after three batches", load(t, s).AuditHead, c.head)
	if c.head.Position != 4 {
		t.Fatalf("fixture chain at %d, want 4", c.head.Position)
	}
}

func testNextKey(t *testing.T, s Backend) {
	commit(t, s, &engine.Batch{Keys: keyEntries(1, 9), NextKey: 10})
	if got := load(t, s).NextKey; got != 10 {
		t.Errorf("NextKey = %d, want 10", got)
	}
	commit(t, s, &engine.Batch{Entities: []engine.EntityState{entityState("x", 1)}})
	if got := load(t, s).NextKey; got != 10 {
		t.Errorf("after a batch without NextKey: NextKey = %d, want 10", got)
	}
	commit(t, s, &engine.Batch{NextKey: 25})
	if got := load(t, s).NextKey; got != 25 {
		t.Errorf("NextKey = %d, want 25", got)
	}
}

func testEvict(t *testing.T, s Backend) {
	commit(t, s, &engine.Batch{Keys: keyEntries(1, 10), NextKey: 11})
	commit(t, s, &engine.Batch{EvictBelow: 6})
	equal(t, "after EvictBelow 6", load(t, s).Keys, keyEntries(6, 10))
	commit(t, s, &engine.Batch{Keys: keyEntries(11, 14), EvictBelow: 9, NextKey: 15})
	equal(t, "after appending and EvictBelow 9", load(t, s).Keys, keyEntries(9, 14))
	commit(t, s, &engine.Batch{EvictBelow: 3}) // below everything: nothing to do
	equal(t, "after EvictBelow 3", load(t, s).Keys, keyEntries(9, 14))
	commit(t, s, &engine.Batch{Keys: keyEntries(15, 16), EvictBelow: 16, NextKey: 17})
	equal(t, "after evicting part of the batch's own keys", load(t, s).Keys, keyEntries(16, 16))
	if got := load(t, s).NextKey; got != 17 {
		t.Errorf("NextKey = %d after eviction, want 17", got)
	}
	// Large batches, evicted a few entries at a time and then in bulk.
	commit(t, s, &engine.Batch{Keys: keyEntries(17, 1000), NextKey: 1001})
	commit(t, s, &engine.Batch{Keys: keyEntries(1001, 1500), NextKey: 1501})
	for _, below := range []uint64{17, 18, 64, 65, 113, 500, 999, 1001, 1002, 1499} {
		commit(t, s, &engine.Batch{EvictBelow: below})
		equal(t, "after EvictBelow "+strconv.FormatUint(below, 10), load(t, s).Keys, keyEntries(below, 1500))
	}
	commit(t, s, &engine.Batch{EvictBelow: 1501})
	if got := load(t, s).Keys; len(got) != 0 {
		t.Errorf("%d keys left after evicting everything", len(got))
	}
}

// bulk is a batch touching every part of a store that already holds fullBatch.
func bulk(t *testing.T, recs []engine.AuditRecord) *engine.Batch {
	return &engine.Batch{
		Keys:       keyEntries(4, 8),
		EvictBelow: 3,
		NextKey:    9,
		Sources:    []engine.SourceState{sourceState("incidents", []string{"agency-1", "dev-1"}, 9), sourceState("new", nil, 1)},
		Entities:   []engine.EntityState{entityState("incident/7", 9), entityState("new", 1)},
		Audit:      recs,
		Quarantine: []engine.QuarantineEntry{quarantineEntry(recs[0].Position, []byte("held"))},
		Resolved:   []uint64{2},
	}
}

func testAuditGap(t *testing.T, s Backend) {
	var c chain
	first := c.records(t, 1)
	if err := s.Commit(t.Context(), &engine.Batch{Audit: c.records(t, 1)}); !errors.Is(err, engine.ErrAuditGap) {
		t.Fatalf("first record at position 2 on an empty store: got %v, want ErrAuditGap", err)
	}
	c = chain{}
	commit(t, s, fullBatch(t, &c, 1))
	before := readState(t, s)
	cases := map[string]func() []engine.AuditRecord{
		"a hole after the head": func() []engine.AuditRecord { cc := c; cc.records(t, 1); return cc.records(t, 2) },
		"a repeated position":   func() []engine.AuditRecord { cc := c; return append(cc.records(t, 1), first...) },
		"a hole inside the batch": func() []engine.AuditRecord {
			cc := c
			r := cc.records(t, 3)
			return []engine.AuditRecord{r[0], r[2]}
		},
		"positions that restart": func() []engine.AuditRecord { return first },
	}
	for name, recs := range cases {
		err := s.Commit(t.Context(), bulk(t, recs()))
		if !errors.Is(err, engine.ErrAuditGap) {
			t.Errorf("%s: Commit = %v, want ErrAuditGap", name, err)
		}
		equal(t, name+": state after the failed commit", readState(t, s), before)
	}
	commit(t, s, bulk(t, c.records(t, 2))) // the same batch with a valid chain goes in
}

func testCancelled(t *testing.T, s Backend) {
	var c chain
	commit(t, s, fullBatch(t, &c, 1))
	before := readState(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b := bulk(t, c.records(t, 3))
	if err := s.Commit(ctx, b); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context = %v, want context.Canceled", err)
	}
	equal(t, "state after the cancelled commit", readState(t, s), before)
	commit(t, s, b)
}

func testScanAudit(t *testing.T, s Backend) {
	var c chain
	var all []engine.AuditRecord
	for _, n := range []int{3, 1, 600} {
		recs := c.records(t, n)
		commit(t, s, &engine.Batch{Audit: recs})
		all = append(all, recs...)
	}
	for _, from := range []uint64{0, 1, 2, 4, 5, 300, 604} {
		start := max(from, 1) - 1
		equal(t, "ScanAudit from "+strconv.FormatUint(from, 10), scanAudit(t, s, from), all[start:])
	}
	if got := scanAudit(t, s, 605); len(got) != 0 {
		t.Errorf("ScanAudit past the head returned %d records", len(got))
	}
}

func testScanAuditStops(t *testing.T, s Backend) {
	var c chain
	commit(t, s, &engine.Batch{Audit: c.records(t, 10)})
	stop := errors.New("stop here")
	var seen []uint64
	err := s.ScanAudit(t.Context(), 4, func(r engine.AuditRecord) error {
		seen = append(seen, r.Position)
		if r.Position == 6 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("ScanAudit = %v, want the callback's error", err)
	}
	equal(t, "positions seen", seen, []uint64{4, 5, 6})
}
