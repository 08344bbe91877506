package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The cases of engine.Store's windows and batches. Each runs on a
// single-owner store and on a group member's handle, in the store's own
// terms (handle): a member's records name it, quarantine ids are offset by
// its base, and a group's keys are read through Update, since its Load
// leaves them out.

func testEmpty(t *testing.T, s *handle) {
	equal(t, "empty snapshot", normalize(load(t, s)), &engine.Snapshot{})
	if got := scanAudit(t, s, 0); len(got) != 0 {
		t.Errorf("ScanAudit on an empty store returned %d records", len(got))
	}
	if got := scanQuarantine(t, s); len(got) != 0 {
		t.Errorf("ScanQuarantine on an empty store returned %d entries", len(got))
	}
}

// fullBatch writes a little of everything, following c.
func (h *handle) fullBatch(t *testing.T, c *chain, firstKey uint64) *engine.Batch {
	recs := c.records(t, 4)
	return &engine.Batch{
		Keys:    h.keys(firstKey, firstKey+2),
		NextKey: firstKey + 3,
		Sources: []engine.SourceState{
			sourceState("incidents", []string{"agency-1", "dev-1"}, 1),
			sourceState("meters", []string{"meter-3"}, 2),
			sparkplugSource(),
		},
		Entities:   []engine.EntityState{entityState("incident/7", 1), entityState("unit/12", 2)},
		Audit:      recs,
		Quarantine: []engine.QuarantineEntry{quarantineEntry(h.q(recs[1].Position), []byte(`{"kwh":0.5}`))},
	}
}

func testRoundTrip(t *testing.T, s *handle) {
	c := s.chain()
	b := s.fullBatch(t, &c, 1)
	commit(t, s, b)
	want := s.view(&engine.Snapshot{
		Keys: b.Keys, Sources: b.Sources, Entities: b.Entities, AuditHead: c.head, NextKey: b.NextKey,
	})
	equal(t, "snapshot", normalize(load(t, s)), want)
	equal(t, "audit", scanAudit(t, s, 0), b.Audit)
	equal(t, "quarantine", scanQuarantine(t, s), b.Quarantine)
	if s.shared() {
		equal(t, "keys read", s.storedKeys(t, 1, 3), b.Keys)
	}
}

// testKeyOrder: on a group's store, whose Rows come in no order, every key
// of every batch is read back exactly.
func testKeyOrder(t *testing.T, s *handle) {
	commit(t, s, &engine.Batch{Keys: s.keys(1, 5), NextKey: 6})
	commit(t, s, &engine.Batch{Keys: s.keys(6, 6), NextKey: 7})
	commit(t, s, &engine.Batch{Keys: s.keys(7, 300), NextKey: 301})
	equal(t, "keys", s.storedKeys(t, 1, 300), s.keys(1, 300))
}

func testSourceUpsert(t *testing.T, s *handle) {
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

func testEntityUpsert(t *testing.T, s *handle) {
	commit(t, s, &engine.Batch{Entities: []engine.EntityState{entityState("incident/7", 1), entityState("unit/12", 1)}})
	commit(t, s, &engine.Batch{Entities: []engine.EntityState{entityState("incident/7", 5)}})
	want := []engine.EntityState{entityState("incident/7", 5), entityState("unit/12", 1)}
	equal(t, "entities", normalize(load(t, s)).Entities, want)
}

func testAuditHead(t *testing.T, s *handle) {
	c := s.chain()
	commit(t, s, &engine.Batch{Audit: c.records(t, 3)})
	equal(t, "head after one batch", load(t, s).AuditHead, c.head)
	commit(t, s, &engine.Batch{Audit: c.records(t, 1)})
	commit(t, s, &engine.Batch{Keys: s.keys(1, 1), NextKey: 2}) // no records: head stays
	equal(t, "head after three batches", load(t, s).AuditHead, c.head)
	if c.head.Position != 4 {
		t.Fatalf("fixture chain at %d, want 4", c.head.Position)
	}
}

func testNextKey(t *testing.T, s *handle) {
	commit(t, s, &engine.Batch{Keys: s.keys(1, 9), NextKey: 10})
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

func testEvict(t *testing.T, s *handle) {
	commit(t, s, &engine.Batch{Keys: s.keys(1, 10), NextKey: 11})
	commit(t, s, &engine.Batch{EvictBelow: 6})
	equal(t, "after EvictBelow 6", load(t, s).Keys, s.keys(6, 10))
	commit(t, s, &engine.Batch{Keys: s.keys(11, 14), EvictBelow: 9, NextKey: 15})
	equal(t, "after appending and EvictBelow 9", load(t, s).Keys, s.keys(9, 14))
	commit(t, s, &engine.Batch{EvictBelow: 3}) // below everything: nothing to do
	equal(t, "after EvictBelow 3", load(t, s).Keys, s.keys(9, 14))
	commit(t, s, &engine.Batch{Keys: s.keys(15, 16), EvictBelow: 16, NextKey: 17})
	equal(t, "after evicting part of the batch's own keys", load(t, s).Keys, s.keys(16, 16))
	if got := load(t, s).NextKey; got != 17 {
		t.Errorf("NextKey = %d after eviction, want 17", got)
	}
	// Large batches, evicted a few entries at a time and then in bulk.
	commit(t, s, &engine.Batch{Keys: s.keys(17, 1000), NextKey: 1001})
	commit(t, s, &engine.Batch{Keys: s.keys(1001, 1500), NextKey: 1501})
	for _, below := range []uint64{17, 18, 64, 65, 113, 500, 999, 1001, 1002, 1499} {
		commit(t, s, &engine.Batch{EvictBelow: below})
		equal(t, "after EvictBelow "+strconv.FormatUint(below, 10), load(t, s).Keys, s.keys(below, 1500))
	}
	commit(t, s, &engine.Batch{EvictBelow: 1501})
	if got := load(t, s).Keys; len(got) != 0 {
		t.Errorf("%d keys left after evicting everything", len(got))
	}
}

// bulk is a batch touching every part of a store that already holds fullBatch.
func (h *handle) bulk(t *testing.T, recs []engine.AuditRecord) *engine.Batch {
	return &engine.Batch{
		Keys:       h.keys(4, 8),
		EvictBelow: 3,
		NextKey:    9,
		Sources:    []engine.SourceState{sourceState("incidents", []string{"agency-1", "dev-1"}, 9), sourceState("new", nil, 1)},
		Entities:   []engine.EntityState{entityState("incident/7", 9), entityState("new", 1)},
		Audit:      recs,
		Quarantine: []engine.QuarantineEntry{quarantineEntry(h.q(recs[0].Position), []byte("held"))},
		Resolved:   []uint64{h.q(2)},
	}
}

func testAuditGap(t *testing.T, s *handle) {
	c := s.chain()
	first := c.records(t, 1)
	if err := s.Commit(t.Context(), &engine.Batch{Audit: c.records(t, 1)}); !errors.Is(err, engine.ErrAuditGap) {
		t.Fatalf("first record at position 2 on an empty store: got %v, want ErrAuditGap", err)
	}
	c = s.chain()
	commit(t, s, s.fullBatch(t, &c, 1))
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
		err := s.Commit(t.Context(), s.bulk(t, recs()))
		if !errors.Is(err, engine.ErrAuditGap) {
			t.Errorf("%s: Commit = %v, want ErrAuditGap", name, err)
		}
		equal(t, name+": state after the failed commit", readState(t, s), before)
	}
	commit(t, s, s.bulk(t, c.records(t, 2))) // the same batch with a valid chain goes in
}

func testCancelled(t *testing.T, s *handle) {
	c := s.chain()
	commit(t, s, s.fullBatch(t, &c, 1))
	before := readState(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b := s.bulk(t, c.records(t, 3))
	if err := s.Commit(ctx, b); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context = %v, want context.Canceled", err)
	}
	equal(t, "state after the cancelled commit", readState(t, s), before)
	commit(t, s, b)
}

func testScanAudit(t *testing.T, s *handle) {
	c := s.chain()
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

func testScanAuditStops(t *testing.T, s *handle) {
	c := s.chain()
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
