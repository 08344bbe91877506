package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

// The outbox: each member's pending entries, the held ones, and the claims
// that hand each member's outbox to one drainer at a time (see
// engine.OutboxClaimer). Its tables are migrations/002_outbox.up.sql.

var (
	_ engine.OutboxStore   = (*Store)(nil)
	_ engine.OutboxClaimer = (*Store)(nil)
)

// outboxStatements are the outbox's SQL texts of one schema.
type outboxStatements struct {
	insert, hold, resolve, list, done, depth, held string
	claim, claimHolder, release, releaseAll        string
}

func newOutboxStatements(q func(string) string) outboxStatements {
	return outboxStatements{
		insert: q(`INSERT INTO {s}.outbox (member, id, entry, payload)
			SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::bytea[])`),
		hold: q(`WITH h AS (
				SELECT m.number, u.id, u.reason FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(member, id, reason)
				JOIN {s}.members m ON m.member = u.member),
			moved AS (
				DELETE FROM {s}.outbox o USING h WHERE o.member = h.number AND o.id = h.id
				RETURNING o.member, o.id, o.entry, o.payload, h.reason)
			INSERT INTO {s}.outbox_held (member, id, entry, payload, reason) SELECT * FROM moved`),
		// Deletes the held entries named, putting those to requeue back
		// with the bytes they were written with; returns the ones it found
		// held, which a concurrent resolution (waiting on the row lock,
		// then finding the row gone) does not.
		resolve: q(`WITH r AS (
				SELECT m.number, u.id, u.requeue FROM unnest($1::text[], $2::bigint[], $3::bool[]) AS u(member, id, requeue)
				JOIN {s}.members m ON m.member = u.member),
			gone AS (
				DELETE FROM {s}.outbox_held h USING r WHERE h.member = r.number AND h.id = r.id
				RETURNING h.member, h.id, h.entry, h.payload, r.requeue),
			back AS (
				INSERT INTO {s}.outbox (member, id, entry, payload)
				SELECT member, id, entry, payload FROM gone WHERE requeue)
			SELECT m.member, gone.id FROM gone JOIN {s}.members m ON m.number = gone.member`),
		list: q(`SELECT entry, payload FROM {s}.outbox
			WHERE member = (SELECT number FROM {s}.members WHERE member = $1) AND id > $2 ORDER BY id LIMIT $3`),
		done: q(`DELETE FROM {s}.outbox
			WHERE member = (SELECT number FROM {s}.members WHERE member = $1) AND id = ANY($2)`),
		depth: q(`SELECT count(*) FROM {s}.outbox WHERE member = (SELECT number FROM {s}.members WHERE member = $1)`),
		held: q(`SELECT m.member, h.entry, h.payload, h.reason FROM {s}.outbox_held h
			JOIN {s}.members m ON m.number = h.member ORDER BY m.member, h.id`),

		// The candidates: this member, and every member whose lease is gone
		// and whose outbox holds entries; each claim is taken when free,
		// expired, this holder's, or (this member's only) held by $4, a
		// holder found dead. In member order, so that two claimants never
		// deadlock.
		claim: q(`WITH cand AS (
				SELECT number FROM {s}.members m
				WHERE number = $1 OR ((holder = '' OR lease_expires < now())
					AND EXISTS (SELECT 1 FROM {s}.outbox o WHERE o.member = m.number))),
			claimed AS (
				INSERT INTO {s}.outbox_claims AS c (member, holder, expires)
				SELECT number, $2, now() + $3::bigint * interval '1 microsecond' FROM cand ORDER BY number
				ON CONFLICT (member) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
				WHERE c.holder = excluded.holder OR c.expires < now() OR (c.member = $1 AND c.holder = $4)
				RETURNING member)
			SELECT m.member FROM claimed JOIN {s}.members m ON m.number = claimed.member ORDER BY m.member`),
		claimHolder: q(`SELECT holder FROM {s}.outbox_claims WHERE member = $1`),
		release: q(`UPDATE {s}.outbox_claims SET holder = '', expires = '-infinity'
			WHERE member = (SELECT number FROM {s}.members WHERE member = $1) AND holder = $2`),
		releaseAll: q(`UPDATE {s}.outbox_claims SET holder = '', expires = '-infinity' WHERE holder = $1`),
	}
}

// queueOutbox queues the batch's outbox writes in write's round trip: its
// resolutions, its entries, then its holds. A batch without them queues
// nothing.
func (s *Store) queueOutbox(queue func(func(pgx.BatchResults) error, string, ...any), b *engine.Batch) error {
	if len(b.Outbox) == 0 && len(b.OutboxHeld) == 0 && len(b.OutboxResolved) == 0 {
		return nil
	}
	if err := engine.CheckOutbox(b); err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	if rs := b.OutboxResolved; len(rs) > 0 {
		members, ids, requeue := make([]string, len(rs)), make([]int64, len(rs)), make([]bool, len(rs))
		for i, r := range rs {
			members[i], ids[i], requeue[i] = r.Member, int64(min(r.ID, math.MaxInt64)), r.Requeue
		}
		queue(resolvedHeld(rs), s.sql.outbox.resolve, members, ids, requeue)
	}
	if len(b.Outbox) > 0 {
		ids, entries, payloads := make([]int64, len(b.Outbox)), make([][]byte, len(b.Outbox)), make([][]byte, len(b.Outbox))
		for i, e := range b.Outbox {
			ids[i], payloads[i] = int64(e.ID), e.Payload
			if payloads[i] == nil {
				payloads[i] = []byte{} // NOT NULL
			}
			e.Payload = nil
			var err error
			if entries[i], err = json.Marshal(&e); err != nil {
				return fmt.Errorf("postgres store: encode outbox entry %d: %w", e.ID, err)
			}
		}
		queue(execd, s.sql.outbox.insert, s.number, ids, entries, payloads)
	}
	if len(b.OutboxHeld) > 0 {
		members, ids, reasons := make([]string, len(b.OutboxHeld)), make([]int64, len(b.OutboxHeld)), make([]string, len(b.OutboxHeld))
		for i, h := range b.OutboxHeld {
			members[i], ids[i], reasons[i] = h.Member, int64(h.ID), h.Reason
		}
		queue(execd, s.sql.outbox.hold, members, ids, reasons)
	}
	return nil
}

// resolvedHeld checks that every held entry rs names was resolved by
// this batch: one that was not held fails it with engine.ErrNotFound.
func resolvedHeld(rs []engine.OutboxResolve) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return dbErr(err)
		}
		type ref struct {
			member string
			id     int64
		}
		gone := map[ref]bool{}
		for rows.Next() {
			var r ref
			if err := rows.Scan(&r.member, &r.id); err != nil {
				return dbErr(err)
			}
			gone[r] = true
		}
		if err := rows.Err(); err != nil {
			return dbErr(err)
		}
		for _, r := range rs {
			if !gone[ref{r.Member, int64(min(r.ID, math.MaxInt64))}] {
				return fmt.Errorf("%w: outbox entry %d of member %q is not held; nothing written", engine.ErrNotFound, r.ID, r.Member)
			}
		}
		return nil
	}
}

// Outbox returns up to limit of member's pending entries with ID > after,
// in ID order.
func (s *Store) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("postgres store: outbox limit %d is below 1", limit)
	}
	if after >= math.MaxInt64 { // above every ID: positions stay below 2^55
		return nil, s.check()
	}
	var out []engine.OutboxEntry
	err := s.query(ctx, func(c *pgx.Conn) error {
		rs, err := c.Query(ctx, s.sql.outbox.list, member, int64(after), limit)
		if err != nil {
			return dbErr(err)
		}
		for rs.Next() {
			var e engine.OutboxEntry
			var entry, payload []byte
			if err := rs.Scan(&entry, &payload); err != nil {
				return dbErr(err)
			}
			if err := json.Unmarshal(entry, &e); err != nil {
				rs.Close()
				return fmt.Errorf("postgres store: decode an outbox entry of member %q: %w", member, err)
			}
			e.Payload = payload
			out = append(out, e)
		}
		return dbErr(rs.Err())
	})
	return out, err
}

// check returns engine.ErrClosed after Close.
func (s *Store) check() error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	return nil
}

// OutboxDone removes delivered entries of member's outbox, durably when it
// returns nil; IDs no longer pending are ignored.
func (s *Store) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	if s.member == "" {
		return fmt.Errorf("%w: outbox done", ErrReadOnly)
	}
	if len(ids) == 0 {
		return s.check()
	}
	args := make([]int64, 0, len(ids))
	for _, id := range ids {
		if id < math.MaxInt64 {
			args = append(args, int64(id))
		}
	}
	return s.query(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, s.sql.outbox.done, member, args)
		return dbErr(err)
	})
}

// OutboxDepth counts member's pending entries.
func (s *Store) OutboxDepth(ctx context.Context, member string) (int, error) {
	var n int64
	err := s.query(ctx, func(c *pgx.Conn) error {
		return dbErr(c.QueryRow(ctx, s.sql.outbox.depth, member).Scan(&n))
	})
	return int(n), err
}

// OutboxHeld returns every member's held entries, by member then ID.
func (s *Store) OutboxHeld(ctx context.Context) ([]engine.HeldEntry, error) {
	var out []engine.HeldEntry
	err := s.query(ctx, func(c *pgx.Conn) error {
		rs, err := c.Query(ctx, s.sql.outbox.held)
		if err != nil {
			return dbErr(err)
		}
		for rs.Next() {
			var h engine.HeldEntry
			var entry, payload []byte
			if err := rs.Scan(&h.Member, &entry, &payload, &h.Reason); err != nil {
				return dbErr(err)
			}
			if err := json.Unmarshal(entry, &h.OutboxEntry); err != nil {
				rs.Close()
				return fmt.Errorf("postgres store: decode a held outbox entry of member %q: %w", h.Member, err)
			}
			h.Payload = payload
			out = append(out, h)
		}
		return dbErr(rs.Err())
	})
	return out, err
}

// ClaimOutboxes takes or renews this handle's outbox claims for ClaimTTL,
// by the server's clock; see engine.OutboxClaimer. A claim of this
// member's outbox held by a process on this host that has died is taken
// over at once, as the lease is.
func (s *Store) ClaimOutboxes(ctx context.Context) ([]string, error) {
	if s.member == "" {
		return nil, fmt.Errorf("%w: claim outboxes", ErrReadOnly)
	}
	var out []string
	err := s.query(ctx, func(c *pgx.Conn) error {
		var err error
		if out, err = s.claim(ctx, c, ""); err != nil || slices.Contains(out, s.member) {
			return err
		}
		var holder string
		err = c.QueryRow(ctx, s.sql.outbox.claimHolder, s.number).Scan(&holder)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !shared.DeadHere(holder)) {
			return nil
		}
		if err != nil {
			return dbErr(err)
		}
		s.log.Warn("taking over the outbox claim of a dead process on this host", "member", s.member, "holder", holder)
		out, err = s.claim(ctx, c, holder)
		return err
	})
	return out, err
}

func (s *Store) claim(ctx context.Context, c *pgx.Conn, dead string) ([]string, error) {
	rs, err := c.Query(ctx, s.sql.outbox.claim, s.number, s.holder, s.leaseTTL.Microseconds(), dead)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: claim outboxes of member %q: %w", s.member, dbErr(err))
	}
	return out, nil
}

// ReleaseOutbox gives up this handle's claim of member's outbox.
func (s *Store) ReleaseOutbox(ctx context.Context, member string) error {
	if s.member == "" {
		return fmt.Errorf("%w: release outbox", ErrReadOnly)
	}
	return s.query(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, s.sql.outbox.release, member, s.holder)
		return dbErr(err)
	})
}

// ClaimTTL is how long a claim holds without renewal: the lease TTL.
func (s *Store) ClaimTTL() time.Duration { return s.leaseTTL }

// releaseClaims gives up every claim of this handle, for Close.
func (s *Store) releaseClaims(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, s.sql.outbox.releaseAll, s.holder); err != nil {
		return fmt.Errorf("postgres store: release the outbox claims of member %q: %w", s.member, err)
	}
	return nil
}
