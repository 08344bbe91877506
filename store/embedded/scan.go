package embedded

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// Scans read in chunks, each in its own short read transaction, and call fn
// outside any transaction: a slow reader never holds the database open
// against a commit that needs to grow the file, and fn may use the store.
const (
	auditScanRecords = 512 // at least, per transaction
	quarantineChunk  = 32
)

// ScanAudit calls fn for each record with position >= from, in order,
// until fn returns an error (which ScanAudit returns) or the log ends.
// Records committed while the scan runs may be included.
func (s *Store) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	next := max(from, 1)
	for {
		recs := make([]engine.AuditRecord, 0, auditScanRecords+64)
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketAudit).Cursor()
			k, v := c.Seek(u64(next))
			if k == nil {
				k, v = c.Last() // next may be inside the last chunk
			} else if binary.BigEndian.Uint64(k) > next {
				if pk, pv := c.Prev(); pk != nil { // next may be inside the chunk before
					k, v = pk, pv
				} else {
					k, v = c.First()
				}
			}
			for ; k != nil && len(recs) < auditScanRecords; k, v = c.Next() {
				var err error
				if recs, err = decodeChunkFrom(recs, k, v, next); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < auditScanRecords {
			return nil
		}
		next = recs[len(recs)-1].Position + 1
	}
}

// ScanQuarantine calls fn for each open entry in ID order. Entries added or
// resolved while the scan runs may or may not be seen.
// CountQuarantine counts the open entries without decoding them.
func (s *Store) CountQuarantine(ctx context.Context) (int, error) {
	n := 0
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQuarantine).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

func (s *Store) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	next := uint64(0)
	for {
		entries := make([]engine.QuarantineEntry, 0, quarantineChunk)
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketQuarantine).Cursor()
			for k, v := c.Seek(u64(next)); k != nil && len(entries) < quarantineChunk; k, v = c.Next() {
				q, err := decodeQuarantine(v)
				if err != nil {
					return fmt.Errorf("%w (id %x)", err, k)
				}
				entries = append(entries, q)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, q := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(q); err != nil {
				return err
			}
		}
		if len(entries) < quarantineChunk {
			return nil
		}
		next = entries[len(entries)-1].ID + 1
	}
}

// Quarantined returns the open entry id, or an error wrapping engine.ErrNotFound.
func (s *Store) Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error) {
	var q engine.QuarantineEntry
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketQuarantine).Get(u64(id))
		if v == nil {
			return fmt.Errorf("%w: quarantine entry %d", engine.ErrNotFound, id)
		}
		var err error
		q, err = decodeQuarantine(v)
		return err
	})
	return q, err
}
