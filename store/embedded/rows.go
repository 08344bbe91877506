package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.RowReader = (*Store)(nil)

// CountRows returns the number of stored sources and entities, which
// each commit keeps in the meta bucket.
func (s *Store) CountRows(ctx context.Context) (sources, entities int, err error) {
	var n rowCount
	err = s.view(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err = readRowCount(tx.Bucket(bucketMeta))
		if errors.Is(err, errNoRowCount) { // a version 1 store a writer has not opened since
			n = countRows(tx)
			return nil
		}
		return err
	})
	return int(n.sources), int(n.entities), err
}

// rowCount is the number of stored sources and entities.
type rowCount struct{ sources, entities uint64 }

var errNoRowCount = errors.New("embedded: the store keeps no row count")

func readRowCount(meta *bolt.Bucket) (rowCount, error) {
	v := meta.Get(keyRows)
	switch {
	case v == nil:
		return rowCount{}, errNoRowCount
	case len(v) != 16:
		return rowCount{}, fmt.Errorf("embedded: corrupt row count %x", v)
	}
	return rowCount{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}, nil
}

func (n rowCount) encode() []byte {
	return binary.BigEndian.AppendUint64(u64(n.sources), n.entities)
}

// countRows counts the rows by walking every page of their buckets.
func countRows(tx *bolt.Tx) rowCount {
	return rowCount{uint64(tx.Bucket(bucketSources).Stats().KeyN), uint64(tx.Bucket(bucketEntities).Stats().KeyN)}
}

// ReadRows begins a read transaction over the committed rows. While it is
// open a commit that must grow the file's map waits for it: the engine
// closes it before it queues a commit.
func (s *Store) ReadRows(ctx context.Context) (engine.RowTx, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.readOnly {
		s.filters.start.Do(s.buildPending)
	}
	for {
		v, f := s.rows.current(), s.filters.current() // f before the snapshot (rowfilter.go)
		if s.readBegins != nil {
			s.readBegins()
		}
		tx, err := s.db.Begin(false)
		if err != nil {
			return nil, fmt.Errorf("embedded: read rows: %w", closedErr(err))
		}
		if s.rows.current() != v || s.filters.current() != f { // a new view or filter meanwhile (withRows, buildFilter)
			_ = tx.Rollback()
			continue
		}
		return &rowTx{path: s.path, tx: tx, log: s.rows, view: v, filters: f,
			sources: tx.Bucket(bucketSources).Cursor(), entities: tx.Bucket(bucketEntities).Cursor()}, nil
	}
}

// rowTx is one read of the rows, in one bbolt read transaction, with a
// cursor on each bucket (Bucket.Get makes a cursor for each read), and the
// row log's view that goes with it.
type rowTx struct {
	path              string // the file, named by ErrDamaged
	tx                *bolt.Tx
	log               *rowLog
	view              *rowView
	filters           [2]*rowFilter // the sources' and entities'; nil where none is built
	sources, entities *bolt.Cursor
}

// get returns the value of key in c's bucket; nil when there is none.
func get(c *bolt.Cursor, key []byte) []byte {
	if k, v := c.Seek(key); bytes.Equal(k, key) {
		return v
	}
	return nil
}

func (r *rowTx) Source(id string) (_ engine.SourceState, _ bool, err error) {
	defer recoverDamaged(r.path, &err, guard())
	v := r.log.get(r.view, kindSource, id)
	if v == nil && mayHold(r.filters[0], id) {
		v = get(r.sources, []byte(id))
	}
	if v == nil {
		return engine.SourceState{}, false, nil
	}
	st, err := decodeRow[engine.SourceState](bucketSources, []byte(id), v)
	return st, err == nil, err
}

func (r *rowTx) Entity(name string) (_ engine.EntityState, _ bool, err error) {
	defer recoverDamaged(r.path, &err, guard())
	v := r.log.get(r.view, kindEntity, name)
	if v == nil && mayHold(r.filters[1], name) {
		v = get(r.entities, []byte(name))
	}
	if v == nil {
		return engine.EntityState{}, false, nil
	}
	st, err := decodeRow[engine.EntityState](bucketEntities, []byte(name), v)
	return st, err == nil, err
}

func (r *rowTx) Close() { _ = r.tx.Rollback() }
