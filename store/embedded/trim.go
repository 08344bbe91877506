package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// keyBase in the meta bucket is the audit base: big-endian position (8) |
// hash (32) of the last record audit retention dropped. Absent until the
// first trim, so a store written before retention existed reads as
// untrimmed and keeps its layout version.
var keyBase = []byte("base")

var _ engine.AuditTrimmer = (*Store)(nil)

// AuditBase returns the position and hash of the last dropped audit
// record; zero when none was dropped.
func (s *Store) AuditBase(ctx context.Context) (engine.AuditHead, error) {
	var base engine.AuditHead
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		base, err = readBase(tx.Bucket(bucketMeta))
		return err
	})
	return base, err
}

func readBase(m *bolt.Bucket) (engine.AuditHead, error) {
	var base engine.AuditHead
	v := m.Get(keyBase)
	if v == nil {
		return base, nil
	}
	if len(v) != 8+len(base.Hash) {
		return base, fmt.Errorf("embedded: corrupt audit base %x", v)
	}
	base.Position = binary.BigEndian.Uint64(v)
	copy(base.Hash[:], v[8:])
	return base, nil
}

// TrimAudit drops the audit records below below in one transaction, synced
// like a commit, and records base as the store's audit base. Chunks wholly
// below are deleted; the chunk that straddles below is rewritten with its
// records from below on. bbolt keeps the file at its size and reuses the
// freed pages for later commits.
func (s *Store) TrimAudit(ctx context.Context, below uint64, base engine.AuditHead) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	err := s.update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := checkTrim(tx, meta, below, base); err != nil {
			return err
		}
		if err := dropAudit(tx.Bucket(bucketAudit), below); err != nil {
			return err
		}
		return meta.Put(keyBase, encodeHead(base))
	})
	if err != nil {
		return fmt.Errorf("embedded: trim audit below %d: %w", below, closedErr(err))
	}
	return nil
}

// checkTrim refuses a trim whose base is not the stored record at below-1,
// or that would drop the record of an open quarantine entry.
func checkTrim(tx *bolt.Tx, meta *bolt.Bucket, below uint64, base engine.AuditHead) error {
	old, err := readBase(meta)
	if err != nil {
		return err
	}
	head, _, err := readMeta(meta)
	if err != nil {
		return err
	}
	if below != base.Position+1 || base.Position <= old.Position || base.Position > head.Position {
		return fmt.Errorf("%w: base at position %d for a trim below %d, with the stored log at %d..%d",
			engine.ErrTrimBase, base.Position, below, old.Position+1, head.Position)
	}
	if k, _ := tx.Bucket(bucketQuarantine).Cursor().First(); k != nil && binary.BigEndian.Uint64(k) < below {
		return fmt.Errorf("%w: entry %d", engine.ErrTrimQuarantine, binary.BigEndian.Uint64(k))
	}
	r, err := auditAt(tx.Bucket(bucketAudit), base.Position)
	if err != nil {
		return err
	}
	if r.Hash != base.Hash {
		return fmt.Errorf("%w: the record at position %d has hash %s, not %s", engine.ErrTrimBase, base.Position, r.Hash, base.Hash)
	}
	return nil
}

// auditAt decodes the stored record at pos.
func auditAt(b *bolt.Bucket, pos uint64) (engine.AuditRecord, error) {
	c := b.Cursor()
	k, v := c.Seek(u64(pos))
	if k == nil {
		k, v = c.Last() // pos may be inside the last chunk
	} else if binary.BigEndian.Uint64(k) > pos {
		k, v = c.Prev()
	}
	if k != nil {
		recs, err := decodeChunkFrom(nil, k, v, pos)
		if err != nil {
			return engine.AuditRecord{}, err
		}
		if len(recs) > 0 && recs[0].Position == pos {
			return recs[0], nil
		}
	}
	return engine.AuditRecord{}, fmt.Errorf("%w: no stored audit record at position %d", engine.ErrTrimBase, pos)
}

// dropAudit deletes the records below below from the audit bucket.
func dropAudit(b *bolt.Bucket, below uint64) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		first := binary.BigEndian.Uint64(k)
		if first >= below {
			return nil
		}
		rest, err := chunkFrom(first, v, below)
		if err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
		if len(rest) > 0 {
			// v belongs to bbolt and may move once the tx writes: copy it.
			return b.Put(u64(below), bytes.Clone(rest))
		}
	}
	return nil
}

// chunkFrom returns the part of a chunk whose first record is at first
// that holds the records from position from on (empty when none).
func chunkFrom(first uint64, v []byte, from uint64) ([]byte, error) {
	for pos := first; len(v) > 0 && pos < from; pos++ {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return nil, fmt.Errorf("%w: at position %d", errCorruptAudit, pos)
		}
		v = v[w+int(n):]
	}
	return v, nil
}
