package storetest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The cases of engine.SharedStore.Update on one member: what decide is
// handed, and what a refused or failed batch writes (nothing).

func testSharedUpdateReads(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	src := sourceState("incidents", []string{"fd", "e1"}, 10)
	commit(t, s, &engine.Batch{Keys: []engine.KeyEntry{sharedKey(1)}, Sources: []engine.SourceState{src},
		Entities: []engine.EntityState{entityState("incident/7", 3)}})
	var c chain
	r := &engine.Reads{Keys: []engine.Hash{keyHash(1), keyHash(9)}, Sources: []string{src.ID(), engine.SourceID("incidents", []string{"none"})},
		Entities: []string{"incident/7", "incident/none"}}
	update(t, s, r, func(rows *engine.Rows) (*engine.Batch, error) {
		if len(rows.Keys) != 1 || rows.Keys[0].Key != keyHash(1) || rows.Keys[0].Digest != sharedKey(1).Digest {
			t.Errorf("keys read: %+v", rows.Keys)
		}
		if len(rows.Sources) != 1 || !reflect.DeepEqual(rows.Sources[0], src) {
			t.Errorf("sources read: %+v", rows.Sources)
		}
		if len(rows.Entities) != 1 || rows.Entities[0].Name != "incident/7" {
			t.Errorf("entities read: %+v", rows.Entities)
		}
		return &engine.Batch{Keys: []engine.KeyEntry{sharedKey(9)}, Entities: []engine.EntityState{entityState("incident/7", 4)},
			Audit: memberRecords(t, &c, "m1", 1)}, nil
	})
	snap := load(t, s)
	if len(snap.Entities) != 1 || snap.Entities[0].Fields.Get("casualties").Num != "4.25" || snap.AuditHead != c.head {
		t.Fatalf("after update: %+v", snap)
	}
}

func testSharedResolveGone(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	var c chain
	id := s.QuarantineBase() + 1
	commit(t, s, &engine.Batch{Audit: memberRecords(t, &c, "m1", 1), Quarantine: []engine.QuarantineEntry{quarantineEntry(id, []byte("{}"))}})
	before := readShared(t, s)
	err := s.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
		return &engine.Batch{Audit: memberRecords(t, &chain{head: c.head}, "m1", 1), Resolved: []uint64{id, id + 1},
			Entities: []engine.EntityState{entityState("x", 1)}}, nil
	})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Update resolving an entry that is not open = %v, want ErrNotFound", err)
	}
	if after := readShared(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused batch changed the store:\n got %+v\nwant %+v", after, before)
	}
}

func testSharedDecideError(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	boom := errors.New("boom")
	before := readShared(t, s)
	err := s.Update(t.Context(), &engine.Reads{Keys: []engine.Hash{keyHash(1)}}, func(*engine.Rows) (*engine.Batch, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want decide's error", err)
	}
	if after := readShared(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("the store changed: %+v", after)
	}
}
