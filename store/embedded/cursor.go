package embedded

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// bucketCursors holds each audit sink's cursor: sink name -> big-endian
// position. Created by the first SetCursor, so a store written before sinks
// existed keeps its layout version.
var bucketCursors = []byte("cursors")

var _ engine.CursorStore = (*Store)(nil)

// Cursor returns the sink's cursor; 0 when it never delivered.
func (s *Store) Cursor(ctx context.Context, name string) (uint64, error) {
	var pos uint64
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCursors)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(name))
		if v == nil {
			return nil
		}
		if len(v) != 8 {
			return fmt.Errorf("embedded: corrupt cursor of sink %q: %x", name, v)
		}
		pos = binary.BigEndian.Uint64(v)
		return nil
	})
	return pos, err
}

// SetCursor records the sink's cursor in one small transaction, synced
// like a commit.
func (s *Store) SetCursor(ctx context.Context, name string, pos uint64) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	return closedErr(s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCursors)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), u64(pos))
	}))
}

// Cursors returns every stored cursor, by sink name: those of sinks the
// configuration no longer names too.
func (s *Store) Cursors(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCursors)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("embedded: corrupt cursor of sink %q: %x", k, v)
			}
			out[string(k)] = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	return out, err
}

// ForgetCursor drops the sink's cursor in one small transaction, synced
// like a commit; false when there was none.
func (s *Store) ForgetCursor(ctx context.Context, name string) (bool, error) {
	if s.closed.Load() {
		return false, engine.ErrClosed
	}
	if s.readOnly {
		return false, ErrReadOnly
	}
	found := false
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCursors)
		if b == nil || b.Get([]byte(name)) == nil {
			return nil
		}
		found = true
		return b.Delete([]byte(name))
	})
	return found, closedErr(err)
}
