package embedded_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance runs the conformance suite on a store in a directory of
// its own per case: single-owner and durable.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Features{Durable: true}, func(t *testing.T) storetest.Open {
		dir := t.TempDir()
		return func(string) (engine.Store, error) {
			s, err := embedded.Open(dir, embedded.Options{Logger: testLogger(t)})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = s.Close() })
			return s, nil
		}
	})
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func open(t *testing.T, dir string, opts embedded.Options) *embedded.Store {
	t.Helper()
	opts.Logger = testLogger(t)
	s, err := embedded.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	rec := engine.AuditRecord{Position: 1, Outcome: "applied"}
	if err := engine.Seal(&rec, engine.Hash{}); err != nil {
		t.Fatal(err)
	}
	w := open(t, dir, embedded.Options{})
	if err := w.Commit(t.Context(), &engine.Batch{Audit: []engine.AuditRecord{rec}, NextKey: 3}); err != nil {
		t.Fatal(err)
	}

	t.Run("a read-only open fails while a writer holds the directory", func(t *testing.T) {
		_, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
		if !errors.Is(err, engine.ErrLocked) {
			t.Fatalf("Open = %v, want ErrLocked", err)
		}
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r1 := open(t, dir, embedded.Options{ReadOnly: true})
	r2 := open(t, dir, embedded.Options{ReadOnly: true})
	t.Run("read-only opens share the directory and read it", func(t *testing.T) {
		for _, r := range []*embedded.Store{r1, r2} {
			snap, err := r.Load(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if snap.AuditHead.Position != 1 || snap.NextKey != 3 {
				t.Errorf("snapshot head %d next key %d, want 1 and 3", snap.AuditHead.Position, snap.NextKey)
			}
		}
	})
	t.Run("a read-only store refuses commits", func(t *testing.T) {
		if err := r1.Commit(t.Context(), &engine.Batch{NextKey: 9}); !errors.Is(err, embedded.ErrReadOnly) {
			t.Errorf("Commit = %v, want ErrReadOnly", err)
		}
	})
	t.Run("a writer cannot open while readers hold the directory", func(t *testing.T) {
		_, err := embedded.Open(dir, embedded.Options{})
		if !errors.Is(err, engine.ErrLocked) {
			t.Fatalf("Open = %v, want ErrLocked", err)
		}
	})
}

func TestReadOnlyNeedsAStore(t *testing.T) {
	_, err := embedded.Open(filepath.Join(t.TempDir(), "missing"), embedded.Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only Open of a missing store = %v, want fs.ErrNotExist", err)
	}
}

func TestRefusesAnotherLayout(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return m.Put([]byte("version"), []byte{0, 0, 0, 0, 0, 0, 0, 9})
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	if s, err := embedded.Open(dir, embedded.Options{}); err == nil {
		_ = s.Close()
		t.Fatal("Open accepted a store with layout version 9")
	} else if !strings.Contains(err.Error(), "newer than this build's 6: upgrade replayguard") {
		t.Errorf("Open of a store with layout version 9: %v", err)
	}
}

// A version 1 store kept its sources and entities as JSON: a reader reads
// them as they are, a writer raises the layout to this build's, reads the
// same, and writes the rows it changes binary.
func TestReadsVersion1Rows(t *testing.T) {
	dir := t.TempDir()
	src := engine.SourceState{Route: "r", Source: []string{"a", "1"}, Feed: "b",
		Epochs: []engine.EpochWindow{{Epoch: "7", Numeric: true, Value: 7, High: 3, First: 1, Bitmap: []uint64{0b1110, 0}}}}
	ent := engine.EntityState{Name: "unit/1", Fields: engine.Fields{
		{Name: "status", FieldValue: engine.FieldValue{Kind: engine.KindString, Str: "released", Version: engine.Version{Epoch: 7, Sequence: 3, Ordinal: 2}}}}}
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		sj, _ := json.Marshal(&src)
		ej, _ := json.Marshal(&ent)
		return errors.Join(tx.Bucket([]byte("meta")).Put([]byte("version"), []byte{0, 0, 0, 0, 0, 0, 0, 1}),
			tx.Bucket([]byte("meta")).Delete([]byte("rows")), // version 1 kept no count
			tx.Bucket([]byte("sources")).Put([]byte(src.ID()), sj),
			tx.Bucket([]byte("entities")).Put([]byte(ent.Name), ej))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	stored := func() (version, srcRow, entRow []byte) {
		t.Helper()
		db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_ = db.View(func(tx *bolt.Tx) error {
			version = bytes.Clone(tx.Bucket([]byte("meta")).Get([]byte("version")))
			srcRow = bytes.Clone(embedded.StoredRow(tx, "sources", []byte(src.ID())))
			entRow = bytes.Clone(embedded.StoredRow(tx, "entities", []byte(ent.Name)))
			return nil
		})
		return
	}
	check := func(s *embedded.Store) {
		t.Helper()
		snap, err := s.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Sources) != 1 || !reflect.DeepEqual(snap.Sources[0], src) {
			t.Errorf("sources = %+v, want %+v", snap.Sources, src)
		}
		if len(snap.Entities) != 1 || !reflect.DeepEqual(snap.Entities[0], ent) {
			t.Errorf("entities = %+v, want %+v", snap.Entities, ent)
		}
	}

	counts := func(s *embedded.Store, sources, entities int) {
		t.Helper()
		if ns, ne, err := s.CountRows(t.Context()); err != nil || ns != sources || ne != entities {
			t.Errorf("CountRows = %d, %d, %v; want %d, %d", ns, ne, err, sources, entities)
		}
	}
	r, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	check(r)
	counts(r, 1, 1)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := stored(); v[7] != 1 {
		t.Fatalf("a read-only open changed the layout to %x", v)
	}

	w, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	check(w)
	counts(w, 1, 1)
	src.Epochs[0].High, src.Epochs[0].Bitmap[0] = 4, 0b11110
	if err := w.Commit(t.Context(), &engine.Batch{Sources: []engine.SourceState{src}}); err != nil {
		t.Fatal(err)
	}
	check(w)
	counts(w, 1, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	v, sr, er := stored()
	if v[7] != 6 {
		t.Errorf("layout after a writer's open = %x, want 6", v)
	}
	if sr[0] == '{' || er[0] != '{' {
		t.Errorf("rows after one write: source %q, entity %q; want the source binary and the entity left as it was", sr, er)
	}
}

// TestAnOlderLayoutIsRaisedSoThatAnOlderBuildRefusesItAtOpen: a build of
// layout 2 reads source and entity rows of formats 1 to 3 and audit
// records of formats 1 and 2 only, one of layout 3 rows up to format 4,
// and this one writes rows of format 4 and 5 and a connection's first
// delivery as a record of format 3. A writer raises a layout 2 or 3 store
// to 4, which such a build refuses when it opens the store, instead of
// running until the first row it cannot read; a reader leaves the layout
// as it is.
func TestAnOlderLayoutIsRaisedSoThatAnOlderBuildRefusesItAtOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	layout := func(set byte) byte {
		t.Helper()
		db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v []byte
		err = db.Update(func(tx *bolt.Tx) error {
			m := tx.Bucket([]byte("meta"))
			if set != 0 {
				if err := m.Put([]byte("version"), []byte{0, 0, 0, 0, 0, 0, 0, set}); err != nil {
					return err
				}
			}
			v = bytes.Clone(m.Get([]byte("version")))
			return nil
		})
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
		return v[7]
	}
	if v := layout(0); v != 6 {
		t.Fatalf("a new store's layout = %d, want 6", v)
	}
	for _, older := range []byte{2, 3, 4, 5} {
		layout(older)
		r, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if v := layout(0); v != older {
			t.Fatalf("a read-only open changed the layout %d to %d", older, v)
		}
		w, err := embedded.Open(dir, embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if v := layout(0); v != 6 {
			t.Fatalf("the layout %d after a writer's open = %d, want 6", older, v)
		}
	}
}

// The store counts its rows as it writes them: a row written again is
// not counted twice, and the count is the same after a reopen.
func TestCountsRows(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	src := func(id string) engine.SourceState { return engine.SourceState{Route: "r", Source: []string{id}} }
	ent := func(name string) engine.EntityState { return engine.EntityState{Name: name} }
	batches := []engine.Batch{
		{Sources: []engine.SourceState{src("c"), src("a"), src("b")}, Entities: []engine.EntityState{ent("x")}},
		{Sources: []engine.SourceState{src("b"), src("d")}, Entities: []engine.EntityState{ent("x"), ent("y")}},
		{Sources: []engine.SourceState{src("a")}},
	}
	for i := range batches {
		if err := s.Commit(t.Context(), &batches[i]); err != nil {
			t.Fatal(err)
		}
	}
	if ns, ne, err := s.CountRows(t.Context()); err != nil || ns != 4 || ne != 2 {
		t.Errorf("CountRows = %d, %d, %v; want 4, 2", ns, ne, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ns, ne, err := r.CountRows(t.Context()); err != nil || ns != 4 || ne != 2 {
		t.Errorf("CountRows after a reopen = %d, %d, %v; want 4, 2", ns, ne, err)
	}
}

// A batch that names a row twice leaves it as it names it last (rows are
// written sorted by key).
func TestARowNamedTwiceIsWrittenAsNamedLast(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := func(feed string) engine.SourceState {
		return engine.SourceState{Route: "r", Source: []string{"x"}, Feed: feed}
	}
	e := func(s string) engine.EntityState {
		return engine.EntityState{Name: "n", Fields: engine.Fields{{Name: "f", FieldValue: engine.FieldValue{Kind: engine.KindString, Str: s}}}}
	}
	b := &engine.Batch{Sources: []engine.SourceState{v("1"), v("2"), v("3")}, Entities: []engine.EntityState{e("1"), e("2"), e("3")}}
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Sources) != 1 || snap.Sources[0].Feed != "3" || len(snap.Entities) != 1 || snap.Entities[0].Fields.Get("f").Str != "3" {
		t.Errorf("rows named three times: %+v, %+v; want the third of each", snap.Sources, snap.Entities)
	}
	if ns, ne, err := s.CountRows(t.Context()); err != nil || ns != 1 || ne != 1 {
		t.Errorf("CountRows = %d, %d, %v; want 1, 1", ns, ne, err)
	}
}
