package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pruneChunk is how many keys one pruning statement deletes: short
// transactions, which never hold up the members' batches for long.
const pruneChunk = 1000

// pruneLoop prunes every pruneEvery until Close.
func (s *Store) pruneLoop() {
	defer s.bg.Done()
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
		}
		if _, err := s.Prune(s.bgCtx); err != nil && s.bgCtx.Err() == nil {
			s.log.Error("pruning keys failed", "err", err)
		}
	}
}

// Prune deletes the keys older than the TTL by the server's clock (the
// clock members stamp keys with: engine.ServerClock), then the oldest by
// ordinal beyond MaxEntries, in chunks, and returns how many it deleted. A key is
// found old by its ordinal too (the engine makes ordinals at least the time
// a key is applied, and the table has no index by time): one whose
// ordinal is ahead of its time stays until its ordinal is past the cutoff. Only one
// member of the group prunes at a time: when another is pruning, Prune
// returns 0 at once. The background task calls it every few seconds. A
// read-only handle refuses with ErrReadOnly.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	if s.member == "" {
		return 0, ErrReadOnly
	}
	var n int64
	err := s.query(ctx, func(c *pgx.Conn) error {
		var got bool
		lock := "replayguard prune " + s.schema
		if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, lock).Scan(&got); err != nil {
			return dbErr(err)
		}
		if !got {
			return nil
		}
		defer func() { _, _ = c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, lock) }()
		var err error
		n, err = s.prune(ctx, c)
		return err
	})
	if n > 0 {
		s.log.Debug("keys pruned", "deleted", n)
	}
	return n, err
}

func (s *Store) prune(ctx context.Context, c *pgx.Conn) (int64, error) {
	if err := s.analyzeNew(ctx, c); err != nil { // the plans wait for autovacuum's; the keys must not wait
		s.log.Warn("analyzing a new group's tables failed; pruning goes on", "err", err)
	}
	var now time.Time // the server's clock, which the group's keys are stamped by: never this process's
	if err := c.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return 0, fmt.Errorf("postgres store: read the server's clock: %w", err)
	}
	n, err := deleteChunks(ctx, c, s.sql.pruneAge, now.Add(-s.ttl).UnixNano())
	if err != nil {
		return n, fmt.Errorf("postgres store: prune keys by age: %w", err)
	}
	var ord int64
	err = c.QueryRow(ctx, s.sql.pruneCutoff, s.maxKeys).Scan(&ord)
	if errors.Is(err, pgx.ErrNoRows) { // no more than MaxEntries
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("postgres store: prune keys by count: %w", err)
	}
	m, err := deleteChunks(ctx, c, s.sql.pruneCount, ord)
	if err != nil {
		return n + m, fmt.Errorf("postgres store: prune keys by count: %w", err)
	}
	return n + m, nil
}

// analyzeAfter is how many keys a new group's keys table holds when the
// pruning task analyzes it, if autovacuum has not yet.
const analyzeAfter = 5000

// analyzeNew analyzes the group's keys, sources and entities once the keys
// table, never analyzed (by anyone: pg_stat_user_tables), holds
// analyzeAfter keys, and checks again each time until the table's
// statistics say it was: an ANALYZE by a role that does not own the
// tables is skipped with a warning. A key read's generic plan
// (a member's prepared statement, planned for any keys after its first
// executions) is made while a new group's table is small: a scan of the
// whole table, which every batch then runs, until the table's first ANALYZE
// has the plan made again, as an index scan. Autovacuum's comes about a
// minute after the table's creation; at 100,000 keys a read of 256 took
// 24 ms on that plan, 1.7 ms on the index.
func (s *Store) analyzeNew(ctx context.Context, c *pgx.Conn) error {
	if s.analyzed.Load() {
		return nil
	}
	var analyzed, due bool
	if err := c.QueryRow(ctx, s.sql.analyzeDue, analyzeAfter, pgx.Identifier{s.schema, "keys"}.Sanitize()).Scan(&analyzed, &due); err != nil {
		return err
	}
	if !analyzed && due {
		_, err := c.Exec(ctx, s.sql.analyze)
		return err
	}
	s.analyzed.Store(analyzed)
	return nil
}

// deleteChunks runs a chunked delete until it deletes less than a chunk.
func deleteChunks(ctx context.Context, c *pgx.Conn, sql string, bound int64) (int64, error) {
	var n int64
	for {
		tag, err := c.Exec(ctx, sql, bound, pruneChunk)
		if err != nil {
			return n, err
		}
		n += tag.RowsAffected()
		if tag.RowsAffected() < pruneChunk {
			return n, nil
		}
	}
}
