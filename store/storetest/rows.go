package storetest

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// testRows checks Capabilities.Rows: LoadKeys is Load without sources and
// entities, the rows are scanned as checkRowScan says, and a read returns
// each committed row by its identity, and nothing for an identity never
// written.
func testRows(t *testing.T, s *handle) {
	rr := s.caps.Rows
	a, b := commitRows(t, s)
	full := load(t, s)
	snap, err := rr.LoadKeys(t.Context())
	if err != nil {
		t.Fatalf("LoadKeys: %v", err)
	}
	if len(snap.Sources)+len(snap.Entities) != 0 {
		t.Errorf("LoadKeys returned %d sources and %d entities, want none", len(snap.Sources), len(snap.Entities))
	}
	equal(t, "LoadKeys keys", snap.Keys, full.Keys)
	equal(t, "LoadKeys head", snap.AuditHead, full.AuditHead)
	checkRowScan(t, rr, full)

	tx, err := rr.ReadRows(t.Context())
	if err != nil {
		t.Fatalf("ReadRows: %v", err)
	}
	defer tx.Close()
	for _, want := range []engine.SourceState{a, b} {
		got, found, err := tx.Source(want.ID())
		if err != nil || !found {
			t.Fatalf("Source(%v) = found %v, %v", want.Source, found, err)
		}
		equal(t, "source read", normalize(&engine.Snapshot{Sources: []engine.SourceState{got}}).Sources,
			normalize(&engine.Snapshot{Sources: []engine.SourceState{want}}).Sources)
	}
	never := sourceState("r", []string{"a", "b", "c"}, 1)
	if _, found, err := tx.Source(never.ID()); err != nil || found {
		t.Errorf("a source never written: found %v, %v", found, err)
	}
	got, found, err := tx.Entity("incident/7")
	if err != nil || !found {
		t.Fatalf("Entity(incident/7) = found %v, %v", found, err)
	}
	equal(t, "entity read", got, entityState("incident/7", 2))
	if _, found, err := tx.Entity("incident/8"); err != nil || found {
		t.Errorf("an entity never written: found %v, %v", found, err)
	}
	tx.Close()
}

// testScan checks Capabilities.Scan as checkRowScan says.
func testScan(t *testing.T, s *handle) {
	commitRows(t, s)
	checkRowScan(t, s.caps.Scan, load(t, s))
}

// commitRows commits two sources and two entities, one of each twice,
// and returns the two sources as they were last written.
func commitRows(t *testing.T, s *handle) (a, b engine.SourceState) {
	a, b = sourceState("r", []string{"a|b", "c"}, 1), sourceState("r", []string{"a", "b|c"}, 1)
	commit(t, s, &engine.Batch{Sources: []engine.SourceState{a, b}, Entities: []engine.EntityState{entityState("incident/7", 1)},
		Keys: s.keys(1, 2), NextKey: 3})
	a = sourceState("r", []string{"a|b", "c"}, 2)
	commit(t, s, &engine.Batch{Sources: []engine.SourceState{a}, Entities: []engine.EntityState{entityState("unit/12", 1), entityState("incident/7", 2)}})
	return a, b
}

// checkRowScan checks that ScanSources and ScanEntities read the rows Load
// does (full), each once, the entities in name order, that a scan whose
// fn fails ends with its error, and that CountRows counts each row once
// however often it was written.
func checkRowScan(t *testing.T, sc engine.RowScanner, full *engine.Snapshot) {
	var entities []engine.EntityState
	if err := sc.ScanEntities(t.Context(), func(e engine.EntityState) error {
		entities = append(entities, e)
		return nil
	}); err != nil {
		t.Fatalf("ScanEntities: %v", err)
	}
	if !slices.IsSortedFunc(entities, func(a, b engine.EntityState) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("ScanEntities out of name order: %v", entities)
	}
	equal(t, "ScanEntities", normalize(&engine.Snapshot{Entities: entities}).Entities, normalize(full).Entities)
	var scanned []engine.SourceState
	if err := sc.ScanSources(t.Context(), func(s engine.SourceState) error {
		scanned = append(scanned, s)
		return nil
	}); err != nil {
		t.Fatalf("ScanSources: %v", err)
	}
	equal(t, "ScanSources", normalize(&engine.Snapshot{Sources: scanned}).Sources, normalize(full).Sources)
	stop := errors.New("enough")
	n := 0
	if err := sc.ScanSources(t.Context(), func(engine.SourceState) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("ScanSources whose fn fails at the first window: %d calls, %v; want 1, its error", n, err)
	}
	if ns, ne, err := sc.CountRows(t.Context()); err != nil || ns != 2 || ne != 2 {
		t.Errorf("CountRows = %d, %d, %v; want 2, 2", ns, ne, err)
	}
}

// testScanMany checks that a scan of more rows than one read of the store
// holds reads each once, the entities in name order.
func testScanMany(t *testing.T, s *handle) {
	sc := s.caps.Scan
	if sc == nil {
		sc = s.caps.Rows
	}
	const n = 2500
	b := &engine.Batch{}
	for i := range n {
		m := strconv.Itoa(i * 7919 % n) // not in name order
		b.Sources = append(b.Sources, sourceState("meters", []string{"meter-" + m}, 1))
		b.Entities = append(b.Entities, entityState("meter/"+m, 1))
	}
	commit(t, s, b)
	var names []string
	if err := sc.ScanEntities(t.Context(), func(e engine.EntityState) error {
		names = append(names, e.Name)
		return nil
	}); err != nil {
		t.Fatalf("ScanEntities: %v", err)
	}
	if len(names) != n || !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != n {
		t.Errorf("ScanEntities read %d names (%d distinct, sorted %v), want %d distinct in order",
			len(names), len(slices.Compact(slices.Clone(names))), slices.IsSorted(names), n)
	}
	ids := map[string]int{}
	if err := sc.ScanSources(t.Context(), func(s engine.SourceState) error {
		ids[s.ID()]++
		return nil
	}); err != nil {
		t.Fatalf("ScanSources: %v", err)
	}
	for id, k := range ids {
		if k != 1 {
			t.Errorf("ScanSources read %q %d times", id, k)
		}
	}
	if len(ids) != n {
		t.Errorf("ScanSources read %d windows, want %d", len(ids), n)
	}
	if ns, ne, err := sc.CountRows(t.Context()); err != nil || ns != n || ne != n {
		t.Errorf("CountRows = %d, %d, %v; want %d, %d", ns, ne, err, n, n)
	}
}
