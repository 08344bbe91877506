package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/engine"
)

// heldValue is the held column of entry q: its key and content, or nil
// (NULL) when it has no key or no content.
func heldValue(q engine.QuarantineEntry) []byte {
	if q.Key == "" || q.Content.IsZero() {
		return nil
	}
	k, err := engine.ParseHash(q.Key)
	if err != nil {
		return nil
	}
	return append(append(make([]byte, 0, 64), k[:]...), q.Content[:]...)
}

// FindHeld returns the lowest id of the open entries holding a message of
// key and content (the partial unique index quarantine_held). It reads what is
// committed, on a connection of its own: the batch that relies on the
// entry locks it in its own transaction (heldOpen).
func (s *Store) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	v := append(append(make([]byte, 0, 64), key[:]...), content[:]...)
	var id int64
	err := s.query(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, s.sql.findHeld, v).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			id = 0
			return nil
		}
		return dbErr(err)
	})
	if err != nil {
		return 0, false, fmt.Errorf("postgres store: find held entry: %w", err)
	}
	return uint64(id), id != 0, nil
}

// heldOpenIDs are the distinct ids of b.HeldOpen.
func heldOpenIDs(b *engine.Batch) []int64 {
	ids := make([]int64, 0, len(b.HeldOpen))
	seen := make(map[uint64]bool, len(b.HeldOpen))
	for _, id := range b.HeldOpen {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, int64(id))
		}
	}
	return ids
}

// heldGone describes entries a batch's duplicates named that a discard or
// release committed meanwhile: a lost race, decided again.
func heldGone(missing int64) string {
	return fmt.Sprintf("%d open quarantine entries the batch's duplicates named were released or discarded meanwhile", missing)
}

// heldInserted checks the insert of a batch's quarantine entries. One of
// a message an open entry holds already fails the unique index
// quarantine_held: an entry another member committed after the batch was
// decided (an insert it has not committed is waited for), a lost race.
// Decided again, the batch finds that entry and records the delivery a
// duplicate of it.
func heldInserted(br pgx.BatchResults) error {
	_, err := br.Exec()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "quarantine_held" {
		return fmt.Errorf("%w: an open quarantine entry holds the same message (%s)", errLostRace, pe.Message)
	}
	return dbErr(err)
}
