package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
)

// What audit retention and the audit sinks need of each member's chain
// (engine.ChainKeeper): its base, its trim, the sinks' cursors on it, and
// the claims that hand a departed member's chain to one live handle. Its
// tables are migrations/003_chains.up.sql.

var _ engine.ChainKeeper = (*Store)(nil)

// chainStatements are the chains' SQL texts of one schema.
type chainStatements struct {
	base, member, lockBase, claimed, held, record, trim, setBase string
	cursor, setCursor, setCursorAt, cursors, forget              string
	claims                                                       claimStatements
}

func newChainStatements(q func(string) string) chainStatements {
	return chainStatements{
		base: q(`SELECT b.position, b.hash FROM {s}.chain_bases b
			JOIN {s}.members m ON m.number = b.member WHERE m.member = $1`),
		member: q(`SELECT number, head_position FROM {s}.members WHERE member = $1`),
		// Takes the chain's base row, locked (two trims of one chain wait
		// for each other), creating it at zero for the chain's first trim.
		lockBase: q(`INSERT INTO {s}.chain_bases AS b (member, position, hash) VALUES ($1, 0, '\x')
			ON CONFLICT (member) DO UPDATE SET position = b.position RETURNING position, hash`),
		// The chain's claim, locked whatever it holds: a handle claiming the
		// chain meanwhile waits for the trim, and reads the base it left.
		claimed: q(`SELECT holder, expires > now() FROM {s}.chain_claims WHERE member = $1 FOR SHARE`),
		held:    q(`SELECT id FROM {s}.quarantine WHERE id > $1 AND id < $2 ORDER BY id LIMIT 1`),
		record:  q(`SELECT record FROM {s}.audit WHERE member = $1 AND position = $2`),
		trim:    q(`DELETE FROM {s}.audit WHERE member = $1 AND position < $2`),
		setBase: q(`UPDATE {s}.chain_bases SET position = $2, hash = $3 WHERE member = $1`),
		cursor: q(`SELECT c.position FROM {s}.chain_cursors c
			JOIN {s}.members m ON m.number = c.member WHERE m.member = $1 AND c.sink = $2`),
		setCursor: q(`INSERT INTO {s}.chain_cursors (member, sink, position)
			SELECT number, $2, $3 FROM {s}.members WHERE member = $1
			ON CONFLICT (member, sink) DO UPDATE SET position = GREATEST(chain_cursors.position, excluded.position)`),
		// As setCursor, only if the chain holds the record whose hash is $4
		// at $3.
		setCursorAt: q(`INSERT INTO {s}.chain_cursors (member, sink, position)
			SELECT m.number, $2, $3 FROM {s}.members m JOIN {s}.audit a ON a.member = m.number AND a.position = $3
			WHERE m.member = $1 AND convert_from(a.record, 'UTF8')::jsonb->>'hash' = $4
			ON CONFLICT (member, sink) DO UPDATE SET position = GREATEST(chain_cursors.position, excluded.position)`),
		cursors: q(`SELECT c.sink, c.position FROM {s}.chain_cursors c
			JOIN {s}.members m ON m.number = c.member WHERE m.member = $1`),
		forget: q(`WITH gone AS (DELETE FROM {s}.chain_cursors WHERE sink = $1 RETURNING member)
			SELECT m.member FROM gone JOIN {s}.members m ON m.number = gone.member ORDER BY m.member`),
		claims: newClaimStatements(q, "chain", "chain_claims", "m.head_position > 0"),
	}
}

// ChainBase returns the last dropped record of member's chain; zero when
// none was dropped or the member has no chain.
func (s *Store) ChainBase(ctx context.Context, member string) (engine.AuditHead, error) {
	var h engine.AuditHead
	err := s.query(ctx, func(c *pgx.Conn) error {
		var err error
		h, err = readHead(ctx, c, s.sql.chain.base, member)
		return err
	})
	return h, err
}

// TrimChain deletes the records of member's chain below below and makes
// base its base, in one transaction; see engine.ChainKeeper. Any member's
// handle may trim any member's chain that no other handle claims; it
// locks the chain's base row, never the member's, so the member's batches
// go on meanwhile. A read-only handle fails with ErrReadOnly.
func (s *Store) TrimChain(ctx context.Context, member string, below uint64, base engine.AuditHead) error {
	if s.member == "" {
		return fmt.Errorf("%w: trim chain", ErrReadOnly)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		number, err := s.checkTrim(ctx, tx, member, below, base)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.chain.trim, number, int64(below)); err != nil {
			return dbErr(err)
		}
		_, err = tx.Exec(ctx, s.sql.chain.setBase, number, int64(base.Position), base.Hash[:])
		return dbErr(err)
	})
	if err != nil {
		return fmt.Errorf("postgres store: trim the chain of member %q below %d: %w", member, below, err)
	}
	return nil
}

// checkTrim locks member's chain base and refuses a trim whose base is not
// the stored record at below-1, or that would drop the record of an open
// quarantine entry of the member. It returns the member's number.
func (s *Store) checkTrim(ctx context.Context, tx pgx.Tx, member string, below uint64, base engine.AuditHead) (int64, error) {
	var number, head int64
	err := tx.QueryRow(ctx, s.sql.chain.member, member).Scan(&number, &head)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: the group has no member %q", engine.ErrTrimBase, member)
	}
	if err != nil {
		return 0, dbErr(err)
	}
	old, err := readHead(ctx, tx, s.sql.chain.lockBase, number)
	if err != nil {
		return 0, err
	}
	if below != base.Position+1 || base.Position <= old.Position || base.Position > uint64(head) {
		return 0, fmt.Errorf("%w: base at position %d for a trim below %d, with the stored chain at %d..%d",
			engine.ErrTrimBase, base.Position, below, old.Position+1, head)
	}
	var holder string
	var live bool
	err = tx.QueryRow(ctx, s.sql.chain.claimed, number).Scan(&holder, &live)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, dbErr(err)
	}
	if err == nil && live && holder != "" && holder != s.holder {
		return 0, fmt.Errorf("%w: member %q's, by %s", engine.ErrChainClaimed, member, holder)
	}
	qbase := number << 40
	var id int64
	err = tx.QueryRow(ctx, s.sql.chain.held, qbase, qbase+int64(below)).Scan(&id)
	if err == nil {
		return 0, fmt.Errorf("%w: entry %d", engine.ErrTrimQuarantine, id)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, dbErr(err)
	}
	var rec []byte
	err = tx.QueryRow(ctx, s.sql.chain.record, number, int64(base.Position)).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) { // the head is above it, but a record is missing
		return 0, fmt.Errorf("%w: no stored record at position %d", engine.ErrTrimBase, base.Position)
	}
	if err != nil {
		return 0, dbErr(err)
	}
	var r engine.AuditRecord
	if err := json.Unmarshal(rec, &r); err != nil {
		return 0, fmt.Errorf("decode the audit record at position %d: %w", base.Position, err)
	}
	if r.Hash != base.Hash {
		return 0, fmt.Errorf("%w: the record at position %d has hash %s, not %s", engine.ErrTrimBase, base.Position, r.Hash, base.Hash)
	}
	return number, nil
}

// ChainCursor returns sink's cursor on member's chain; 0 when none.
func (s *Store) ChainCursor(ctx context.Context, member, sink string) (uint64, error) {
	var pos int64
	err := s.query(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, s.sql.chain.cursor, member, sink).Scan(&pos)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return dbErr(err)
	})
	return uint64(pos), err
}

// ChainCursors returns every cursor stored on member's chain, by sink.
func (s *Store) ChainCursors(ctx context.Context, member string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.query(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, s.sql.chain.cursors, member)
		if err != nil {
			return dbErr(err)
		}
		var sink string
		var pos int64
		_, err = pgx.ForEachRow(rows, []any{&sink, &pos}, func() error {
			out[sink] = uint64(pos)
			return nil
		})
		return dbErr(err)
	})
	return out, err
}

// ForgetSink drops sink's cursor on every member's chain, in one
// statement, and returns the members whose chain had one, sorted.
func (s *Store) ForgetSink(ctx context.Context, sink string) ([]string, error) {
	if s.member == "" {
		return nil, fmt.Errorf("%w: forget a sink", ErrReadOnly)
	}
	var members []string
	err := s.query(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, s.sql.chain.forget, sink)
		if err != nil {
			return dbErr(err)
		}
		var m string
		_, err = pgx.ForEachRow(rows, []any{&m}, func() error {
			members = append(members, m)
			return nil
		})
		return dbErr(err)
	})
	return members, err
}

// SetChainCursor records pos as sink's cursor on member's chain, durably
// when it returns nil, unless the cursor is already past it: a process
// whose claim of the chain ended while it delivered cannot take the cursor
// back from the one that claimed the chain next. A member the group never
// had fails it with engine.ErrNotFound; a read-only handle with
// ErrReadOnly.
func (s *Store) SetChainCursor(ctx context.Context, member, sink string, pos uint64) error {
	if s.member == "" {
		return fmt.Errorf("%w: set chain cursor", ErrReadOnly)
	}
	return s.query(ctx, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, s.sql.chain.setCursor, member, sink, int64(pos))
		if err != nil {
			return dbErr(err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: postgres store: set the cursor of sink %q: the group has no member %q", engine.ErrNotFound, sink, member)
		}
		return nil
	})
}

// SetChainCursorAt records at.Position as sink's cursor on member's chain,
// as SetChainCursor does, only if the chain holds the record at (its hash)
// there, in one statement; engine.ErrCursorRecord otherwise.
func (s *Store) SetChainCursorAt(ctx context.Context, member, sink string, at engine.AuditHead) error {
	if s.member == "" {
		return fmt.Errorf("%w: set chain cursor", ErrReadOnly)
	}
	return s.query(ctx, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, s.sql.chain.setCursorAt, member, sink, int64(at.Position), at.Hash.String())
		if err != nil {
			return dbErr(err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		var number, head int64
		err = c.QueryRow(ctx, s.sql.chain.member, member).Scan(&number, &head)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: postgres store: set the cursor of sink %q: the group has no member %q", engine.ErrNotFound, sink, member)
		}
		if err != nil {
			return dbErr(err)
		}
		return fmt.Errorf("%w: postgres store: sink %q, position %d of member %q's chain (head %d)", engine.ErrCursorRecord, sink, at.Position, member, head)
	})
}

// ClaimChains takes or renews this handle's chain claims for ClaimTTL, by
// the server's clock: its own member's, and that of every member with a
// chain whose lease is gone; see engine.ChainKeeper. A claim of this
// member's chain held by a process on this host that has died is taken
// over at once, as the lease is.
func (s *Store) ClaimChains(ctx context.Context) ([]string, error) {
	return s.claimEach(ctx, s.sql.chain.claims)
}

// ReleaseChain gives up this handle's claim of member's chain.
func (s *Store) ReleaseChain(ctx context.Context, member string) error {
	return s.releaseClaim(ctx, s.sql.chain.claims, member)
}
