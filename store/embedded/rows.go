package embedded

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.RowReader = (*Store)(nil)

// CountRows returns the number of stored sources and entities.
func (s *Store) CountRows(ctx context.Context) (sources, entities int, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		sources = tx.Bucket(bucketSources).Stats().KeyN
		entities = tx.Bucket(bucketEntities).Stats().KeyN
		return ctx.Err()
	})
	return sources, entities, err
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
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("embedded: read rows: %w", closedErr(err))
	}
	return &rowTx{tx: tx, sources: tx.Bucket(bucketSources), entities: tx.Bucket(bucketEntities)}, nil
}

// rowTx is one read of the rows, in one bbolt read transaction.
type rowTx struct {
	tx                *bolt.Tx
	sources, entities *bolt.Bucket
}

func (r *rowTx) Source(id string) (engine.SourceState, bool, error) {
	v := r.sources.Get([]byte(id))
	if v == nil {
		return engine.SourceState{}, false, nil
	}
	st, err := decodeRow[engine.SourceState](bucketSources, []byte(id), v)
	return st, err == nil, err
}

func (r *rowTx) Entity(name string) (engine.EntityState, bool, error) {
	v := r.entities.Get([]byte(name))
	if v == nil {
		return engine.EntityState{}, false, nil
	}
	st, err := decodeRow[engine.EntityState](bucketEntities, []byte(name), v)
	return st, err == nil, err
}

func (r *rowTx) Close() { _ = r.tx.Rollback() }
