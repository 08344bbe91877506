package storetest

import (
	"cmp"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of a group's store as one member sees it: what Load and the
// scanners return, and what a refused batch leaves.

func testSharedEmpty(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	snap := load(t, s)
	if len(snap.Keys)+len(snap.Sources)+len(snap.Entities) != 0 || snap.AuditHead != (engine.AuditHead{}) {
		t.Fatalf("new group loaded %+v", snap)
	}
	if h, err := s.Head(t.Context()); err != nil || h != (engine.AuditHead{}) {
		t.Fatalf("Head = %+v, %v", h, err)
	}
	if cs, err := s.Chains(t.Context()); err != nil || len(cs) != 0 {
		t.Fatalf("Chains = %+v, %v", cs, err)
	}
	if q := scanQuarantine(t, s); len(q) != 0 {
		t.Fatalf("quarantine = %+v", q)
	}
}

// memberRecords returns n sealed records of member's chain after c's head.
func memberRecords(t *testing.T, c *chain, member string, n int) []engine.AuditRecord {
	t.Helper()
	c.member = member
	return c.records(t, n)
}

func testSharedRoundTrip(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	var c chain
	b := &engine.Batch{
		Keys:     []engine.KeyEntry{sharedKey(1), sharedKey(2)},
		Sources:  []engine.SourceState{sourceState("incidents", []string{"fd", "e1"}, 10), sourceState("incidents", []string{"pd", "u7"}, 3)},
		Entities: []engine.EntityState{entityState("incident/7", 3), entityState("unit/e1", 9)},
		Audit:    memberRecords(t, &c, "m1", 3),
	}
	b.Quarantine = []engine.QuarantineEntry{quarantineEntry(s.QuarantineBase()+2, []byte(`{"x":1}`))}
	commit(t, s, b)
	snap := normalize(load(t, s))
	if len(snap.Keys) != 0 {
		t.Errorf("a shared store's Load returned %d keys; it leaves them to Update's reads", len(snap.Keys))
	}
	want := normalize(&engine.Snapshot{Sources: b.Sources, Entities: b.Entities, AuditHead: c.head})
	if !reflect.DeepEqual(snap.Sources, want.Sources) || !reflect.DeepEqual(snap.Entities, want.Entities) || snap.AuditHead != c.head {
		t.Fatalf("Load:\n got %+v\nwant %+v", snap, want)
	}
	if got := scanAudit(t, s, 1); !reflect.DeepEqual(got, b.Audit) {
		t.Fatalf("ScanAudit:\n got %+v\nwant %+v", got, b.Audit)
	}
	if got := scanQuarantine(t, s); !reflect.DeepEqual(got, b.Quarantine) {
		t.Fatalf("quarantine:\n got %+v\nwant %+v", got, b.Quarantine)
	}
	// The keys are there for the next batch's reads.
	var rows *engine.Rows
	update(t, s, &engine.Reads{Keys: []engine.Hash{keyHash(1), keyHash(2), keyHash(3)}}, func(r *engine.Rows) (*engine.Batch, error) {
		rows = r
		return &engine.Batch{}, nil
	})
	if got := slices.SortedFunc(slices.Values(rows.Keys), byOrdinal); !reflect.DeepEqual(got, b.Keys) {
		t.Fatalf("keys read:\n got %+v\nwant %+v", got, b.Keys)
	}
}

func testSharedAuditGap(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	var c chain
	commit(t, s, &engine.Batch{Audit: memberRecords(t, &c, "m1", 2)})
	before := load(t, s)
	recs := memberRecords(t, &c, "m1", 2)[1:] // skips position 3
	err := s.Commit(t.Context(), &engine.Batch{Audit: recs, Entities: []engine.EntityState{entityState("x", 1)}})
	if !errors.Is(err, engine.ErrAuditGap) {
		t.Fatalf("Commit with a gap = %v, want ErrAuditGap", err)
	}
	if after := load(t, s); !reflect.DeepEqual(normalize(after), normalize(before)) {
		t.Fatalf("a refused batch changed the store: %+v", after)
	}
}

func testSharedPayloads(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	var c chain
	payloads := [][]byte{{}, {0}, []byte("\xff\xfe\x00binary\r\n"), []byte(`{"a":"\u0000"}`), make([]byte, 300<<10)}
	b := &engine.Batch{Audit: memberRecords(t, &c, "m1", len(payloads))}
	for i, p := range payloads {
		b.Quarantine = append(b.Quarantine, quarantineEntry(s.QuarantineBase()+uint64(i+1), p))
	}
	commit(t, s, b)
	for i, p := range payloads {
		q, err := s.Quarantined(t.Context(), s.QuarantineBase()+uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if string(q.Payload) != string(p) {
			t.Fatalf("payload %d came back as %d bytes %q…, want %d", i, len(q.Payload), q.Payload[:min(16, len(q.Payload))], len(p))
		}
	}
}

// sharedState is what a group store holds, as one member sees it.
type sharedState struct {
	Snap       *engine.Snapshot
	Chains     []engine.Chain
	Quarantine []engine.QuarantineEntry
}

func readShared(t *testing.T, s *handle) sharedState {
	t.Helper()
	cs, err := s.Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return sharedState{Snap: normalize(load(t, s)), Chains: cs, Quarantine: scanQuarantine(t, s)}
}

// sharedKey is a key entry applied now: a shared store's pruning would
// remove an older one.
func sharedKey(n uint64) engine.KeyEntry {
	return engine.KeyEntry{Ordinal: n, Key: keyHash(n), Digest: keyHash(n + 7), Time: time.Now().UnixNano()}
}

func byOrdinal(a, b engine.KeyEntry) int { return cmp.Compare(a.Ordinal, b.Ordinal) }
