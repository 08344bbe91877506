package embedded

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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
	err = s.update(func(tx *bolt.Tx) error {
		if err := apply(tx, b, enc); err != nil {
			return err
		}
		// The last moment to give up: past here the batch is synced.
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("embedded: commit: %w", closedErr(err))
	}
	return nil
}

// apply writes the batch in tx; an error rolls everything back.
func apply(tx *bolt.Tx, b *engine.Batch, enc *encoded) error {
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
	if err := putStates(tx, b, enc); err != nil {
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

func putStates(tx *bolt.Tx, b *engine.Batch, enc *encoded) error {
	sources, entities := tx.Bucket(bucketSources), tx.Bucket(bucketEntities)
	// Rows are written in key order, and pages split nearly full: a batch's
	// rows come in no order, and most of a fleet's rows, once written, are
	// rewritten in place rather than joined by new neighbours.
	sources.FillPercent, entities.FillPercent = rowFill, rowFill
	ids := make([]string, len(b.Sources))
	for i := range b.Sources {
		ids[i] = b.Sources[i].ID()
	}
	// The engine says which rows are new (Batch.NewRows); a batch made
	// by hand has each row looked up.
	var added rowCount
	look := b.NewRows == nil
	if !look {
		added = rowCount{sources: uint64(b.NewRows.Sources), entities: uint64(b.NewRows.Entities)}
	}
	sc, ec := sources.Cursor(), entities.Cursor() // one cursor a bucket: Get makes one each time
	for _, i := range sortedBy(len(ids), func(i int) string { return ids[i] }) {
		key := []byte(ids[i])
		if look {
			if k, _ := sc.Seek(key); !bytes.Equal(k, key) {
				added.sources++
			}
		}
		if err := sources.Put(key, enc.sources[i]); err != nil {
			return err
		}
	}
	for _, i := range sortedBy(len(b.Entities), func(i int) string { return b.Entities[i].Name }) {
		key := []byte(b.Entities[i].Name)
		if look {
			if k, _ := ec.Seek(key); !bytes.Equal(k, key) {
				added.entities++
			}
		}
		if err := entities.Put(key, enc.entities[i]); err != nil {
			return err
		}
	}
	if added == (rowCount{}) {
		return nil
	}
	meta := tx.Bucket(bucketMeta)
	n, err := readRowCount(meta)
	if err != nil {
		return err
	}
	n.sources += added.sources
	n.entities += added.entities
	return meta.Put(keyRows, n.encode())
}

// rowFill is how full a page of sources or entities is left when it splits.
const rowFill = 0.9

// sortedBy returns 0…n-1 ordered by key, keeping the order of equal keys:
// a row a batch names twice is written as it names it last.
func sortedBy(n int, key func(int) string) []int {
	type keyed struct {
		key string
		i   int
	}
	rows := make([]keyed, n)
	for i := range rows {
		rows[i] = keyed{key(i), i}
	}
	slices.SortFunc(rows, func(a, b keyed) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	order := make([]int, n)
	for j, r := range rows {
		order[j] = r.i
	}
	return order
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
