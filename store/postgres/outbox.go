package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
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
	claims                                         claimStatements
}

func newOutboxStatements(q func(string) string) outboxStatements {
	return outboxStatements{
		insert: q(`INSERT INTO {s}.outbox (member, id, entry, payload)
			SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::bytea[])`),
		hold: q(`WITH h AS (
				SELECT m.number, u.member AS name, u.id, u.reason FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(member, id, reason)
				JOIN {s}.members m ON m.member = u.member),
			moved AS (
				DELETE FROM {s}.outbox o USING h WHERE o.member = h.number AND o.id = h.id
				RETURNING o.member, o.id, o.entry, o.payload, h.reason, h.name),
			kept AS (
				INSERT INTO {s}.outbox_held (member, id, entry, payload, reason)
				SELECT member, id, entry, payload, reason FROM moved)
			SELECT name, id FROM moved`),
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

		claims: newClaimStatements(q, "outbox", "outbox_claims", "EXISTS (SELECT 1 FROM {s}.outbox o WHERE o.member = m.number)"),
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
		queue(movedHeld(b.OutboxHeld), s.sql.outbox.hold, members, ids, reasons)
	}
	return nil
}

// movedHeld checks that every operator's hold (Pending) among hs moved
// its entry: one no longer pending (the drainer delivered it meanwhile)
// fails the batch with engine.ErrNotFound.
func movedHeld(hs []engine.OutboxHold) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		moved, err := memberIDs(br)
		if err != nil {
			return err
		}
		for _, h := range hs {
			if h.Pending && !moved[memberID{h.Member, int64(h.ID)}] {
				return fmt.Errorf("%w: outbox entry %d of member %q is no longer pending (delivered meanwhile); nothing written", engine.ErrNotFound, h.ID, h.Member)
			}
		}
		return nil
	}
}

// memberID names one outbox entry of a member.
type memberID struct {
	member string
	id     int64
}

// memberIDs reads the entries a statement returned as (member, id) rows.
func memberIDs(br pgx.BatchResults) (map[memberID]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, dbErr(err)
	}
	found := map[memberID]bool{}
	for rows.Next() {
		var r memberID
		if err := rows.Scan(&r.member, &r.id); err != nil {
			return nil, dbErr(err)
		}
		found[r] = true
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(err)
	}
	return found, nil
}

// resolvedHeld checks that every held entry rs names was resolved by
// this batch: one that was not held fails it with engine.ErrNotFound.
func resolvedHeld(rs []engine.OutboxResolve) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		gone, err := memberIDs(br)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if !gone[memberID{r.Member, int64(min(r.ID, math.MaxInt64))}] {
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
	return s.claimEach(ctx, s.sql.outbox.claims)
}

// ReleaseOutbox gives up this handle's claim of member's outbox.
func (s *Store) ReleaseOutbox(ctx context.Context, member string) error {
	return s.releaseClaim(ctx, s.sql.outbox.claims, member)
}

// ClaimTTL is how long a claim holds without renewal: the lease TTL.
func (s *Store) ClaimTTL() time.Duration { return s.leaseTTL }
