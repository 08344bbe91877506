package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
)

// scanChunk is how many rows a scan reads per query; fn runs between
// queries, never while one is open.
const scanChunk = 1000

// Load returns the group's sources and entities and this member's chain
// head (zero on a read-only handle). Keys stay empty: the group's key
// table is read per batch by Update.
func (s *Store) Load(ctx context.Context) (*engine.Snapshot, error) {
	snap := &engine.Snapshot{}
	err := s.query(ctx, func(c *pgx.Conn) error {
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return dbErr(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if snap.Sources, err = queryStates[engine.SourceState](ctx, tx, s.sql.allSources); err != nil {
			return err
		}
		if snap.Entities, err = queryStates[engine.EntityState](ctx, tx, s.sql.allEntities); err != nil {
			return err
		}
		if s.member != "" {
			snap.AuditHead, err = readHead(ctx, tx, s.sql.head, s.member)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// ScanSources calls fn for each of the group's source windows, in id
// order, a chunk at a time: no connection is held while fn runs, and a
// window written meanwhile may be read in its new state or its old.
func (s *Store) ScanSources(ctx context.Context, fn func(engine.SourceState) error) error {
	return scanRows(ctx, s, s.sql.scanSources, fn)
}

// ScanEntities is ScanSources of the group's entities, in name order.
func (s *Store) ScanEntities(ctx context.Context, fn func(engine.EntityState) error) error {
	return scanRows(ctx, s, s.sql.scanEntities, fn)
}

// CountRows returns the number of the group's sources and entities.
func (s *Store) CountRows(ctx context.Context) (sources, entities int, err error) {
	err = s.query(ctx, func(c *pgx.Conn) error {
		return dbErr(c.QueryRow(ctx, s.sql.countRows).Scan(&sources, &entities))
	})
	return sources, entities, err
}

// scanRows reads the rows sql returns (a key and a state, after the key
// $1, at most $2) chunk by chunk, and calls fn for each.
func scanRows[T any, P row[T]](ctx context.Context, s *Store, sql string, fn func(T) error) error {
	after := []byte{}
	for {
		var chunk []T
		err := s.query(ctx, func(c *pgx.Conn) error {
			rs, err := c.Query(ctx, sql, after, scanChunk)
			if err != nil {
				return dbErr(err)
			}
			for rs.Next() {
				var b []byte
				var v T
				if err := rs.Scan(&after, &b); err != nil {
					return dbErr(err)
				}
				if err := P(&v).UnmarshalBinary(b); err != nil {
					rs.Close()
					return fmt.Errorf("postgres store: %w", err)
				}
				chunk = append(chunk, v)
			}
			return dbErr(rs.Err())
		})
		if err != nil {
			return err
		}
		for _, v := range chunk {
			if err := fn(v); err != nil {
				return err
			}
		}
		if len(chunk) < scanChunk {
			return nil
		}
	}
}

func queryStates[T any, P row[T]](ctx context.Context, tx pgx.Tx, sql string) ([]T, error) {
	rs, err := tx.Query(ctx, sql)
	if err != nil {
		return nil, dbErr(err)
	}
	out := []T{}
	for rs.Next() {
		var b []byte
		var v T
		if err := rs.Scan(&b); err != nil {
			return nil, dbErr(err)
		}
		if err := P(&v).UnmarshalBinary(b); err != nil {
			rs.Close()
			return nil, fmt.Errorf("postgres store: %w", err)
		}
		out = append(out, v)
	}
	return out, dbErr(rs.Err())
}

// readHead reads a position and a hash, as sql returns them for arg (a
// member id or number): a chain's head or base; zero when there is none.
func readHead(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, arg any) (engine.AuditHead, error) {
	var pos int64
	var hash []byte
	err := q.QueryRow(ctx, sql, arg).Scan(&pos, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.AuditHead{}, nil
	}
	if err != nil {
		return engine.AuditHead{}, dbErr(err)
	}
	h := engine.AuditHead{Position: uint64(pos)}
	copy(h.Hash[:], hash)
	return h, nil
}

// Head returns this member's chain head; zero on a read-only handle.
func (s *Store) Head(ctx context.Context) (engine.AuditHead, error) {
	var h engine.AuditHead
	if s.member == "" {
		if s.closed.Load() {
			return h, engine.ErrClosed
		}
		return h, nil
	}
	err := s.query(ctx, func(c *pgx.Conn) error {
		var err error
		h, err = readHead(ctx, c, s.sql.head, s.member)
		return err
	})
	return h, err
}

// ScanAudit is ScanChain over this member's chain. A read-only handle has
// none: it fails, pointing at ScanChain.
func (s *Store) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	if s.member == "" {
		if s.closed.Load() {
			return engine.ErrClosed
		}
		return errors.New("postgres store: a read-only handle has no audit chain of its own: name a member (ScanChain)")
	}
	return s.ScanChain(ctx, s.member, from, fn)
}

// ScanChain calls fn for each record of member's chain from position from
// on, in order, until fn returns an error, which it returns.
func (s *Store) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	from = max(from, 1)
	for {
		var recs []engine.AuditRecord
		err := s.query(ctx, func(c *pgx.Conn) error {
			rs, err := c.Query(ctx, s.sql.scanAudit, member, int64(from), scanChunk)
			if err != nil {
				return dbErr(err)
			}
			for rs.Next() {
				var r engine.AuditRecord
				if err := json.Unmarshal(rs.RawValues()[0], &r); err != nil {
					rs.Close()
					return fmt.Errorf("postgres store: decode an audit record of member %q: %w", member, err)
				}
				recs = append(recs, r)
			}
			return dbErr(rs.Err())
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < scanChunk {
			return nil
		}
		from = recs[len(recs)-1].Position + 1
	}
}

// Chains returns the head of every member's chain that has a record,
// ordered by member id.
func (s *Store) Chains(ctx context.Context) ([]engine.Chain, error) {
	var out []engine.Chain
	err := s.query(ctx, func(c *pgx.Conn) error {
		rs, err := c.Query(ctx, s.sql.chains)
		if err != nil {
			return dbErr(err)
		}
		for rs.Next() {
			var ch engine.Chain
			var pos int64
			var hash []byte
			if err := rs.Scan(&ch.Member, &pos, &hash); err != nil {
				return dbErr(err)
			}
			ch.Head.Position = uint64(pos)
			copy(ch.Head.Hash[:], hash)
			out = append(out, ch)
		}
		return dbErr(rs.Err())
	})
	return out, err
}

// StrayAudit finds the records the store holds outside every chain
// Chains lists: past the head their member's row keeps, or of a member
// number no row names ("#N" then). It returns the first such chain's
// member, its last record's position and the head kept; last is zero when
// every record is in a chain. It reads the whole audit table.
func (s *Store) StrayAudit(ctx context.Context) (member string, last, head uint64, err error) {
	err = s.query(ctx, func(c *pgx.Conn) error {
		var l, h int64
		err := c.QueryRow(ctx, s.sql.strayAudit).Scan(&member, &l, &h)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		last, head = uint64(l), uint64(h)
		return dbErr(err)
	})
	return member, last, head, err
}

// CountQuarantine counts the group's open entries without reading them.
func (s *Store) CountQuarantine(ctx context.Context) (int, error) {
	var n int64
	err := s.query(ctx, func(c *pgx.Conn) error {
		return dbErr(c.QueryRow(ctx, s.sql.countQuar).Scan(&n))
	})
	return int(n), err
}

// ScanQuarantine calls fn for each open entry of the group in id order.
func (s *Store) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	var from int64
	for {
		var qs []engine.QuarantineEntry
		err := s.query(ctx, func(c *pgx.Conn) error {
			rs, err := c.Query(ctx, s.sql.scanQuar, from, scanChunk)
			if err != nil {
				return dbErr(err)
			}
			for rs.Next() {
				q, err := scanEntry(rs)
				if err != nil {
					rs.Close()
					return err
				}
				qs = append(qs, q)
			}
			return dbErr(rs.Err())
		})
		if err != nil {
			return err
		}
		for _, q := range qs {
			if err := fn(q); err != nil {
				return err
			}
		}
		if len(qs) < scanChunk {
			return nil
		}
		from = int64(qs[len(qs)-1].ID) + 1
	}
}

// Quarantined returns the open entry id, or an error wrapping
// engine.ErrNotFound.
func (s *Store) Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error) {
	var q engine.QuarantineEntry
	err := s.query(ctx, func(c *pgx.Conn) error {
		var err error
		q, err = scanEntry(c.QueryRow(ctx, s.sql.quarantined, int64(id)))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: quarantine entry %d", engine.ErrNotFound, id)
		}
		return err
	})
	return q, err
}

func scanEntry(row pgx.Row) (engine.QuarantineEntry, error) {
	var q engine.QuarantineEntry
	var id int64
	var entry, payload []byte
	if err := row.Scan(&id, &entry, &payload); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return q, err
		}
		return q, dbErr(err)
	}
	if err := json.Unmarshal(entry, &q); err != nil {
		return q, fmt.Errorf("postgres store: decode quarantine entry %d: %w", id, err)
	}
	q.ID, q.Payload = uint64(id), payload
	return q, nil
}
