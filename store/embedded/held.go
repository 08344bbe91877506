package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// bucketHeld indexes the open quarantine entries by the key and content
// of the message each holds (engine.HeldFinder): key (32 bytes), content
// (32), entry id (8, big-endian) → nothing. Created by the first commit
// that holds a message with a key; the open entries a store written
// before it holds are indexed when a writer raises its layout to
// heldSince (backfillHeld).
var bucketHeld = []byte("held")

// heldIndexKey is the index key of entry id, held under key and content.
func heldIndexKey(key, content engine.Hash, id uint64) []byte {
	k := make([]byte, 0, 72)
	k = append(append(k, key[:]...), content[:]...)
	return binary.BigEndian.AppendUint64(k, id)
}

// putHeld indexes the batch's entries that have a key and content, and
// takes those it resolves out of the index, in the batch's transaction.
// A batch that holds nothing and resolves nothing reads nothing.
func putHeld(tx *bolt.Tx, b *engine.Batch) error {
	if len(b.Quarantine) == 0 && len(b.Resolved) == 0 {
		return nil
	}
	var idx *bolt.Bucket
	for _, q := range b.Quarantine {
		key, ok := heldKey(q)
		if !ok || q.Content.IsZero() {
			continue
		}
		if idx == nil {
			var err error
			if idx, err = tx.CreateBucketIfNotExists(bucketHeld); err != nil {
				return err
			}
		}
		if err := idx.Put(heldIndexKey(key, q.Content, q.ID), nil); err != nil {
			return err
		}
	}
	return unindexResolved(tx, b.Resolved)
}

// unindexResolved takes the entries ids names out of the index, before
// they are deleted: each one's key and content follow from the entry.
func unindexResolved(tx *bolt.Tx, ids []uint64) error {
	idx := tx.Bucket(bucketHeld)
	if idx == nil || len(ids) == 0 {
		return nil
	}
	quar := tx.Bucket(bucketQuarantine)
	for _, id := range ids {
		v := quar.Get(u64(id))
		if v == nil {
			continue
		}
		q, err := decodeQuarantine(v)
		if err != nil {
			return fmt.Errorf("quarantine entry %d: %w", id, err)
		}
		key, ok := heldKey(q)
		if !ok {
			continue
		}
		if err := idx.Delete(heldIndexKey(key, engine.HeldContent(q.Topic, q.Payload), id)); err != nil {
			return err
		}
	}
	return nil
}

// heldKey is q's key, when it has one.
func heldKey(q engine.QuarantineEntry) (engine.Hash, bool) {
	if q.Key == "" {
		return engine.Hash{}, false
	}
	k, err := engine.ParseHash(q.Key)
	return k, err == nil
}

// FindHeld returns the lowest id of the open entries holding a message of
// key and content.
func (s *Store) FindHeld(ctx context.Context, key, content engine.Hash) (id uint64, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		id, found = findHeld(tx, key, content)
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("embedded: find held entry: %w", err)
	}
	return id, found, nil
}

// FindHeld is Store.FindHeld in the rows' read (engine.HeldRowTx): the
// engine looks up a held entry while it holds this read, and a second
// read beside it could wait forever for a commit that grows the file,
// which waits for this one.
func (r *rowTx) FindHeld(key, content engine.Hash) (uint64, bool, error) {
	id, found := findHeld(r.tx, key, content)
	return id, found, nil
}

// findHeld looks key and content up in tx's index: the first entry under
// them that is still open. An index key a build from before the index
// left behind (it resolves an entry without knowing of the bucket) is
// passed over.
func findHeld(tx *bolt.Tx, key, content engine.Hash) (uint64, bool) {
	idx := tx.Bucket(bucketHeld)
	if idx == nil {
		return 0, false
	}
	quar := tx.Bucket(bucketQuarantine)
	prefix := heldIndexKey(key, content, 0)[:64]
	c := idx.Cursor()
	for k, _ := c.Seek(prefix); len(k) == 72 && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if id := binary.BigEndian.Uint64(k[64:]); quar.Get(u64(id)) != nil {
			return id, true
		}
	}
	return 0, false
}

// heldSince is the layout from which every open entry of a message with a
// key is in the held index: a writer raising an older store indexes those
// held before the index (backfillHeld) in the transaction that raises it,
// and a build from before, which holds entries the index does not, refuses
// the raised store.
const heldSince = 5

// backfillHeld indexes, in id order, the open entries that have a key and
// no index key, unless an open entry of their key and content is indexed
// already: of several, the lowest id.
func backfillHeld(tx *bolt.Tx) error {
	var idx *bolt.Bucket
	return tx.Bucket(bucketQuarantine).ForEach(func(_, v []byte) error {
		q, err := decodeQuarantine(v)
		if err != nil {
			// Left unindexed, as before the raise: the entry's own reads
			// report it, and the store still opens.
			return nil
		}
		key, ok := heldKey(q)
		if !ok {
			return nil
		}
		content := engine.HeldContent(q.Topic, q.Payload)
		if _, found := findHeld(tx, key, content); found {
			return nil
		}
		if idx == nil {
			if idx, err = tx.CreateBucketIfNotExists(bucketHeld); err != nil {
				return err
			}
		}
		return idx.Put(heldIndexKey(key, content, q.ID), nil)
	})
}
