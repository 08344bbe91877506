package embedded_test

import (
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
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
	}
}
