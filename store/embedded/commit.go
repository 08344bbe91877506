package embedded

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// encoded is a batch turned into bytes before the write transaction starts,
// so the transaction only copies them in.
type encoded struct {
	audit      []auditChunk
	keys       [][]byte // key chunks, without the entries the batch evicts itself
	sources    [][]byte
	entities   [][]byte
	quarantine [][]byte
	outbox     [][]byte
}

func encode(b *engine.Batch) (*encoded, error) {
	for i := range b.Audit {
		if b.Audit[i].Member != "" { // a group's record: its hash covers a field this store cannot keep
			return nil, fmt.Errorf("embedded: audit record %d names member %q: this store keeps one chain, not a group's", b.Audit[i].Position, b.Audit[i].Member)
		}
	}
	e := &encoded{
		audit:      chunkAudit(b.Audit),
		keys:       chunkKeys(b.Keys, b.EvictBelow),
		sources:    make([][]byte, len(b.Sources)),
		entities:   make([][]byte, len(b.Entities)),
		quarantine: make([][]byte, len(b.Quarantine)),
	}
	var err error
	for i := range b.Sources {
		if e.sources[i], err = b.Sources[i].AppendBinary(nil); err != nil {
			return nil, fmt.Errorf("embedded: encode source %q: %w", b.Sources[i].Route, err)
		}
	}
	for i := range b.Entities {
		if e.entities[i], err = b.Entities[i].AppendBinary(nil); err != nil {
			return nil, fmt.Errorf("embedded: encode entity %q: %w", b.Entities[i].Name, err)
		}
	}
	for i := range b.Quarantine {
		if e.quarantine[i], err = encodeQuarantine(b.Quarantine[i]); err != nil {
			return nil, fmt.Errorf("embedded: encode quarantine entry %d: %w", b.Quarantine[i].ID, err)
		}
	}
	if e.outbox, err = encodeOutbox(b); err != nil {
		return nil, err
	}
	return e, nil
}

// chunkKeys encodes the entries at or above evictBelow in chunks of up to
// chunkEntries.
func chunkKeys(entries []engine.KeyEntry, evictBelow uint64) [][]byte {
	buf := make([]byte, 0, len(entries)*keyEntrySize)
	for _, k := range entries {
		if k.Ordinal >= evictBelow {
			buf = appendKeyEntry(buf, k)
		}
	}
	var chunks [][]byte
	for len(buf) > 0 {
		n := min(len(buf), chunkEntries*keyEntrySize)
		chunks = append(chunks, buf[:n:n])
		buf = buf[n:]
	}
	return chunks
}

// Commit writes the batch in one transaction and, unless the store was
// opened with NoSync, syncs it to disk before returning. On error nothing
// was written.
func (s *Store) Commit(ctx context.Context, b *engine.Batch) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("embedded: commit: %w", err)
	}
	enc, err := encode(b)
	if err != nil {
		return err
	}
	s.commitMu.Lock() // the row log in memory takes in the commits in their order
	defer s.commitMu.Unlock()
	if s.closed.Load() { // Close drained the log meanwhile
		return engine.ErrClosed
	}
	rows := enc.loggedRows(b)
	var written rowWrite
	err = s.update(func(tx *bolt.Tx) error {
		var err error
		if written, err = s.apply(tx, b, enc, rows); err != nil {
			return err
		}
		// The last moment to give up: past here the batch is synced.
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("embedded: commit: %w", closedErr(err))
	}
	s.rows.committed(written)
	return nil
}

// apply writes the batch in tx; an error rolls everything back.
func (s *Store) apply(tx *bolt.Tx, b *engine.Batch, enc *encoded, rows []loggedRow) (rowWrite, error) {
	written, err := s.putStates(tx, b, rows)
	if err != nil {
		return written, err
	}
	return written, applyRest(tx, b, enc)
}

// applyRest writes what the batch holds beside its rows.
func applyRest(tx *bolt.Tx, b *engine.Batch, enc *encoded) error {
	meta := tx.Bucket(bucketMeta)
	head, nextKey, err := readMeta(meta)
	if err != nil {
		return err
	}
	newHead, err := engine.NextHead(head, b.Audit)
	if err != nil {
		return err
	}
	audit := tx.Bucket(bucketAudit)
	audit.FillPercent = 1 // append only: pack pages full
	for _, c := range enc.audit {
		if err := audit.Put(u64(c.first), c.data); err != nil {
			return err
		}
	}
	if err := putKeys(tx.Bucket(bucketKeys), b, enc.keys); err != nil {
		return err
	}
	if err := putHeld(tx, b); err != nil { // before the resolved entries are deleted
		return err
	}
	if err := putQuarantine(tx.Bucket(bucketQuarantine), b, enc.quarantine); err != nil {
		return err
	}
	if err := putOutbox(tx, b, enc.outbox); err != nil {
		return err
	}
	if newHead != head {
		if err := meta.Put(keyHead, encodeHead(newHead)); err != nil {
			return err
		}
	}
	if b.NextKey > nextKey {
		return meta.Put(keyNextKey, u64(b.NextKey))
	}
	return nil
}

// putKeys appends the batch's chunks and evicts entries below b.EvictBelow:
// whole chunks are deleted, the one that straddles the bound is trimmed.
func putKeys(keys *bolt.Bucket, b *engine.Batch, chunks [][]byte) error {
	keys.FillPercent = 1
	for _, c := range chunks {
		if err := keys.Put(c[:8], c); err != nil {
			return err
		}
	}
	if b.EvictBelow == 0 {
		return nil
	}
	c := keys.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		n := len(v) / keyEntrySize
		if n == 0 || chunkOrdinal(v, n-1) < b.EvictBelow {
			if err := c.Delete(); err != nil {
				return err
			}
			continue
		}
		i := 0
		for i < n && chunkOrdinal(v, i) < b.EvictBelow {
			i++
		}
		if i == 0 {
			return nil
		}
		// v belongs to bbolt and may move once the tx writes: copy it.
		return keys.Put(bytes.Clone(k), bytes.Clone(v[i*keyEntrySize:]))
	}
	return nil
}

// loggedRows are the batch's source and entity rows, in its order.
func (e *encoded) loggedRows(b *engine.Batch) []loggedRow {
	rows := make([]loggedRow, 0, len(b.Sources)+len(b.Entities))
	for i := range b.Sources {
		rows = append(rows, loggedRow{kindSource, b.Sources[i].ID(), e.sources[i]})
	}
	for i := range b.Entities {
		rows = append(rows, loggedRow{kindEntity, b.Entities[i].Name, e.entities[i]})
	}
	return rows
}

// putStates writes the batch's rows (putRowLog) and counts those new.
func (s *Store) putStates(tx *bolt.Tx, b *engine.Batch, rows []loggedRow) (rowWrite, error) {
	// The engine says which rows are new (Batch.NewRows); a batch made
	// by hand has each row looked up, before the rows are written.
	var added rowCount
	if b.NewRows != nil {
		added = rowCount{sources: uint64(b.NewRows.Sources), entities: uint64(b.NewRows.Entities)}
	} else {
		added = s.countNew(tx, rows)
	}
	written, err := s.putRowLog(tx, rows)
	if err != nil || added == (rowCount{}) {
		return written, err
	}
	meta := tx.Bucket(bucketMeta)
	n, err := readRowCount(meta)
	if err != nil {
		return written, err
	}
	n.sources += added.sources
	n.entities += added.entities
	return written, meta.Put(keyRows, n.encode())
}

// countNew counts the rows of rows that neither their bucket nor the row
// log holds (a row named twice counts once).
func (s *Store) countNew(tx *bolt.Tx, rows []loggedRow) rowCount {
	var added rowCount
	seen := map[rowID]bool{}
	sc, ec := tx.Bucket(bucketSources).Cursor(), tx.Bucket(bucketEntities).Cursor()
	for _, r := range rows {
		id := rowID{r.kind, r.key}
		if seen[id] || s.rows.holds(r.kind, r.key) {
			continue
		}
		seen[id] = true
		c, n := ec, &added.entities
		if r.kind == kindSource {
			c, n = sc, &added.sources
		}
		if get(c, []byte(r.key)) == nil {
			*n++
		}
	}
	return added
}

func putQuarantine(q *bolt.Bucket, b *engine.Batch, enc [][]byte) error {
	for i, e := range b.Quarantine {
		if err := q.Put(u64(e.ID), enc[i]); err != nil {
			return err
		}
	}
	for _, id := range b.Resolved {
		if err := q.Delete(u64(id)); err != nil {
			return err
		}
	}
	return nil
}
