package embedded_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// TestAHeldIndexKeyAnEarlierBuildLeftIsPassedOver: a build from before the
// index of open entries by key and content resolves an entry without
// taking its key out of the index; FindHeld passes over it, to the next
// open entry of the same key and content, and finds none once no entry
// is open, never naming one that holds nothing.
func TestAHeldIndexKeyAnEarlierBuildLeftIsPassedOver(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	key, content := engine.Hash{1}, engine.Hash{2}
	b := &engine.Batch{}
	for pos := uint64(1); pos <= 2; pos++ {
		r := engine.AuditRecord{Position: pos, Outcome: engine.Quarantined.String()}
		r.Hash, _ = engine.ChainHash(r)
		b.Audit = append(b.Audit, r)
		b.Quarantine = append(b.Quarantine, engine.QuarantineEntry{ID: pos, Topic: "t", Key: key.String(), Content: content, Payload: []byte{byte(pos)}})
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if id, found, err := s.FindHeld(ctx, key, content); err != nil || !found || id != 1 {
		t.Fatalf("FindHeld: #%d, %v, %v; want #1", id, found, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	resolve := func(id uint64) { // as a build from before does: the entry alone
		t.Helper()
		db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("quarantine")).Delete(binary.BigEndian.AppendUint64(nil, id))
		})
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		resolved uint64
		want     uint64 // 0: none
	}{{1, 2}, {2, 0}} {
		resolve(c.resolved)
		s, err := embedded.Open(dir, embedded.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		id, found, err := s.FindHeld(ctx, key, content)
		if err != nil || found != (c.want != 0) || id != c.want {
			t.Errorf("FindHeld with #%d resolved by a build from before: #%d, %v, %v; want #%d", c.resolved, id, found, err, c.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
