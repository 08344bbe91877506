package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.RouteRecorder = (*Store)(nil)

// RecordRoutes records the key derivation of each route of want that the
// group has none for, and returns the one the group holds for each route
// of want. Two members recording one route at once insert it once: the
// other's insert waits for the first to commit and then does nothing, and
// its read, a statement after, sees the first's.
func (s *Store) RecordRoutes(ctx context.Context, want map[string][]byte) (map[string][]byte, error) {
	if s.member == "" {
		return nil, fmt.Errorf("%w: record routes", ErrReadOnly)
	}
	names := slices.Sorted(maps.Keys(want)) // one order, so that two inserts never deadlock
	ds := make([][]byte, len(names))
	for i, n := range names {
		ds[i] = want[n]
	}
	got := make(map[string][]byte, len(want))
	err := s.query(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, s.sql.insertRoutes, names, ds); err != nil {
			return dbErr(err)
		}
		return s.readRoutes(ctx, c, names, got)
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

var _ engine.RouteRecords = (*Store)(nil)

// RecordedRoutes returns the key derivation the group records for each of
// names that has one, reading only: also on a store opened without a
// member.
func (s *Store) RecordedRoutes(ctx context.Context, names []string) (map[string][]byte, error) {
	got := make(map[string][]byte, len(names))
	err := s.query(ctx, func(c *pgx.Conn) error { return s.readRoutes(ctx, c, names, got) })
	if err != nil {
		return nil, err
	}
	return got, nil
}

// readRoutes reads into got the recorded derivation of each of names
// that has one.
func (s *Store) readRoutes(ctx context.Context, c *pgx.Conn, names []string, got map[string][]byte) error {
	rows, err := c.Query(ctx, s.sql.readRoutes, names)
	if err != nil {
		return dbErr(err)
	}
	var name string
	var d []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &d}, func() error {
		got[name] = slices.Clone(d)
		return nil
	})
	return dbErr(err)
}
