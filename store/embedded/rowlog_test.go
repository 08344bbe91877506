package embedded_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// rowModel is what a store must read back: each row's newest value, by
// source id and by entity name.
type rowModel struct {
	sources  map[string]engine.SourceState
	entities map[string]engine.EntityState
}

func newRowModel() *rowModel {
	return &rowModel{sources: map[string]engine.SourceState{}, entities: map[string]engine.EntityState{}}
}

func (m *rowModel) apply(b *engine.Batch) {
	for _, s := range b.Sources {
		m.sources[s.ID()] = s
	}
	for _, e := range b.Entities {
		m.entities[e.Name] = e
	}
}

func testSource(id string, n int) engine.SourceState {
	return engine.SourceState{Route: "r", Source: []string{id},
		Epochs: []engine.EpochWindow{{Epoch: "1", Numeric: true, Value: 1, High: int64(n), First: 1}}}
}

func testEntity(name string, n int) engine.EntityState {
	return engine.EntityState{Name: name, Fields: engine.Fields{
		{Name: "n", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: strconv.Itoa(n)}}}}
}

// rowBatch is commit n's batch: a run of neighbouring entities (which a
// store that already holds them puts into their tree), or a few rows drawn
// at random (which it logs), sources among them.
func rowBatch(n int) engine.Batch {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	var b engine.Batch
	if rng.IntN(3) == 0 {
		first := rng.IntN(560)
		for i := range 40 {
			b.Entities = append(b.Entities, testEntity(fmt.Sprintf("e%03d", first+i), n))
		}
		return b
	}
	for range 1 + rng.IntN(6) {
		b.Sources = append(b.Sources, testSource(fmt.Sprintf("s%03d", rng.IntN(200)), n))
		b.Entities = append(b.Entities, testEntity(fmt.Sprintf("e%03d", rng.IntN(600)), n))
	}
	return b
}

// checkRows reads every row of the model back from s, one at a time, and
// a row it does not hold.
func checkRows(t *testing.T, s *embedded.Store, m *rowModel, when string) {
	t.Helper()
	rt, err := s.ReadRows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for id, want := range m.sources {
		if got, ok, err := rt.Source(id); err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: source %q = %+v, %v, %v; want %+v", when, id, got, ok, err, want)
		}
	}
	for name, want := range m.entities {
		if got, ok, err := rt.Entity(name); err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: entity %q = %+v, %v, %v; want %+v", when, name, got, ok, err, want)
		}
	}
	if _, ok, err := rt.Entity("e999"); ok || err != nil {
		t.Fatalf("%s: an entity never written read as there (%v)", when, err)
	}
}

// checkScans checks Load, the scans and the row count against the model:
// every row once, in key order.
func checkScans(t *testing.T, s *embedded.Store, m *rowModel, when string) {
	t.Helper()
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var scanned []engine.EntityState
	if err := s.ScanEntities(t.Context(), func(e engine.EntityState) error { scanned = append(scanned, e); return nil }); err != nil {
		t.Fatal(err)
	}
	var sources []engine.SourceState
	if err := s.ScanSources(t.Context(), func(x engine.SourceState) error { sources = append(sources, x); return nil }); err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range m.entities {
			if !yield(k) {
				return
			}
		}
	})
	want := make([]engine.EntityState, 0, len(names))
	for _, k := range names {
		want = append(want, m.entities[k])
	}
	if !reflect.DeepEqual(snap.Entities, want) && !(len(want) == 0 && len(snap.Entities) == 0) {
		t.Fatalf("%s: Load's entities (%d) differ from the %d written", when, len(snap.Entities), len(want))
	}
	if !reflect.DeepEqual(scanned, want) && !(len(want) == 0 && len(scanned) == 0) {
		t.Fatalf("%s: ScanEntities (%d) differs from the %d written, in key order", when, len(scanned), len(want))
	}
	if len(snap.Sources) != len(m.sources) || len(sources) != len(m.sources) {
		t.Fatalf("%s: Load read %d sources, ScanSources %d; want %d", when, len(snap.Sources), len(sources), len(m.sources))
	}
	for i, x := range sources {
		if !reflect.DeepEqual(x, m.sources[x.ID()]) || (i > 0 && sources[i-1].ID() >= x.ID()) {
			t.Fatalf("%s: ScanSources row %d = %+v, out of order or not the newest", when, i, x)
		}
	}
	if ns, ne, err := s.CountRows(t.Context()); err != nil || ns != len(m.sources) || ne != len(m.entities) {
		t.Fatalf("%s: CountRows = %d, %d, %v; want %d, %d", when, ns, ne, err, len(m.sources), len(m.entities))
	}
}

// TestRowsReadBackThroughTheLogAndItsMerges commits batches whose rows go
// into their trees and into the row log, with thresholds that freeze the
// log every few commits and merge it a few rows a commit, and reads every
// row back after each commit, and across reopens (read-only too), each
// Close having written the log's rows into their trees.
func TestRowsReadBackThroughTheLogAndItsMerges(t *testing.T) {
	dir := t.TempDir()
	open := func(o embedded.Options) *embedded.Store {
		t.Helper()
		s, err := embedded.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		embedded.SetRowLogMerge(s, 60, 1<<20, 9)
		return s
	}
	s := open(embedded.Options{NoSync: true})
	m := newRowModel()
	drained := 0 // the rows logged when Close began
	for n := 1; n <= 400; n++ {
		b := rowBatch(n)
		b.NewRows = nil // counted by the store
		if err := s.Commit(t.Context(), &b); err != nil {
			t.Fatalf("commit %d: %v", n, err)
		}
		m.apply(&b)
		when := fmt.Sprintf("after commit %d", n)
		checkRows(t, s, m, when)
		if n%7 == 0 {
			checkScans(t, s, m, when)
		}
		if n%50 == 0 {
			drained += embedded.LoggedRows(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			r := open(embedded.Options{ReadOnly: true})
			if n := embedded.LoggedRows(r); n != 0 {
				t.Fatalf("%s: the store's row log holds %d rows after Close; want them written into their trees", when, n)
			}
			checkScans(t, r, m, when+", read-only")
			checkRows(t, r, m, when+", read-only")
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(embedded.Options{NoSync: true})
			checkScans(t, s, m, when+", reopened")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if drained == 0 {
		t.Fatal("the row log was empty at every Close: the test drained nothing")
	}
}

// TestAReadBegunBeforeAMergeReadsEveryRow: a read of the rows that began
// before the log's rows were frozen and merged into their trees still
// reads each of them, though its transaction's trees lack them.
func TestAReadBegunBeforeAMergeReadsEveryRow(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	embedded.SetRowLogMerge(s, 10, 1<<20, 3)
	m := newRowModel()
	commit := func(b engine.Batch) {
		t.Helper()
		if err := s.Commit(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		m.apply(&b)
	}
	for i := range 4 {
		commit(engine.Batch{Entities: []engine.EntityState{testEntity(fmt.Sprintf("a%d", i), 1)}})
	}
	// While a read is open a commit that must map more of the file waits
	// for it: a large entry first maps enough for the commits below.
	commit(engine.Batch{Quarantine: []engine.QuarantineEntry{{ID: 1, Topic: "t", Outcome: "malformed", Payload: make([]byte, 20<<20)}}})
	rt, err := s.ReadRows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	before := map[string]engine.EntityState{}
	for k, v := range m.entities {
		before[k] = v
	}
	for i := range 40 { // freezes the rows above, and merges them a few a commit
		commit(engine.Batch{Entities: []engine.EntityState{testEntity(fmt.Sprintf("b%02d", i), 2)}})
	}
	for name, want := range before {
		if got, ok, err := rt.Entity(name); err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("entity %q read in a read begun before the merge = %+v, %v, %v; want %+v", name, got, ok, err, want)
		}
	}
	rt.Close()
	checkRows(t, s, m, "after the merges")
	checkScans(t, s, m, "after the merges")
}

// TestARowLogChunkThatDoesNotDecodeIsADamagedStore: Open refuses a store
// whose row log holds a chunk cut short, as damaged, naming the chunk,
// rather than open without the rows it held.
func TestARowLogChunkThatDoesNotDecodeIsADamagedStore(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := rowBatch(2) // a few rows drawn at random: logged
	if err := s.Commit(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	// The file as a crash would leave it: Close writes the log's rows
	// into their trees.
	crashed := t.TempDir()
	file, err := os.ReadFile(filepath.Join(dir, embedded.FileName))
	if err == nil {
		err = os.WriteFile(filepath.Join(crashed, embedded.FileName), file, 0o600)
	}
	if err := errors.Join(err, s.Close()); err != nil {
		t.Fatal(err)
	}
	dir = crashed
	db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("rowlog")).Cursor()
		k, v := c.First()
		if k == nil {
			return errors.New("the batch's rows were not logged")
		}
		return tx.Bucket([]byte("rowlog")).Put(bytes.Clone(k), bytes.Clone(v[:len(v)-3]))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	s, err = embedded.Open(dir, embedded.Options{ReadOnly: true})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open accepted a store whose row log chunk is cut short")
	}
	if !errors.Is(err, embedded.ErrDamaged) || !strings.Contains(err.Error(), "corrupt row log chunk") {
		t.Fatalf("Open of a store whose row log chunk is cut short: %v; want ErrDamaged naming the chunk", err)
	}
}
