package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/store/internal/shared"
)

// A claim hands one member's outbox (engine.OutboxClaimer) or chain
// (engine.ChainKeeper) to one handle at a time; both kinds follow the same
// rules, each in a table of its own (outbox_claims, chain_claims), with
// the same statements.

// claimStatements are the SQL texts of one kind of claim in one schema.
type claimStatements struct {
	what                               string // "outbox" or "chain", for errors and logs
	claim, holder, release, releaseAll string
	holders                            string // every holder of a lease or of a claim of this kind
}

// newClaimStatements makes the statements of the claims kept in table,
// where another member is a candidate when has holds of its members row m.
func newClaimStatements(q func(string) string, what, table, has string) claimStatements {
	t := func(sql string) string { return q(strings.ReplaceAll(sql, "{table}", table)) }
	return claimStatements{
		what: what,
		// The candidates, while this handle ($2) is its member's ($1)
		// lease holder: this member, and every member whose lease is gone
		// (expired, or held by one of $5, processes on this host found
		// dead) and that has something to hand over; a handle whose lease
		// another process took has none. Each claim is taken when free,
		// expired, this holder's, held by one of $5, or (this member's
		// only) held by $4, a holder found dead. In member order, so that
		// two claimants never deadlock. The member row is read, not
		// locked: a batch holds it.
		claim: t(`WITH cand AS (
				SELECT number FROM {s}.members m
				WHERE EXISTS (SELECT 1 FROM {s}.members WHERE number = $1 AND holder = $2)
				AND (number = $1 OR ((holder = '' OR holder = ANY($5::text[]) OR (SELECT expires FROM {s}.leases l WHERE l.member = m.member) < now()) AND ` + has + `))),
			claimed AS (
				INSERT INTO {s}.{table} AS c (member, holder, expires)
				SELECT number, $2, now() + $3::bigint * interval '1 microsecond' FROM cand ORDER BY number
				ON CONFLICT (member) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
				WHERE c.holder = excluded.holder OR c.expires < now() OR (c.member = $1 AND c.holder = $4) OR c.holder = ANY($5::text[])
				RETURNING member)
			SELECT m.member FROM claimed JOIN {s}.members m ON m.number = claimed.member ORDER BY m.member`),
		holder:  t(`SELECT holder FROM {s}.{table} WHERE member = $1`),
		holders: t(`SELECT holder FROM {s}.members WHERE holder <> '' UNION SELECT holder FROM {s}.{table} WHERE holder <> ''`),
		release: t(`UPDATE {s}.{table} SET holder = '', expires = '-infinity'
			WHERE member = (SELECT number FROM {s}.members WHERE member = $1) AND holder = $2`),
		releaseAll: t(`UPDATE {s}.{table} SET holder = '', expires = '-infinity' WHERE holder = $1`),
	}
}

// claimEach takes or renews this handle's claims of kind st for ClaimTTL,
// by the server's clock, and returns the members claimed, sorted. A claim
// of this member's held by a process on this host that has died is taken
// over at once, as the lease is; so is another member's, when its lease or
// the claim is held by a process on this host that has died (an ingest
// killed with SIGKILL, whose member id no process will take again).
func (s *Store) claimEach(ctx context.Context, st claimStatements) ([]string, error) {
	if s.member == "" {
		return nil, fmt.Errorf("%w: claim %ss", ErrReadOnly, st.what)
	}
	var out []string
	err := s.query(ctx, func(c *pgx.Conn) error {
		dead, err := deadHolders(ctx, c, st)
		if err != nil {
			return err
		}
		if out, err = s.claim(ctx, c, st, "", dead); err != nil || slices.Contains(out, s.member) {
			return err
		}
		var holder string
		err = c.QueryRow(ctx, st.holder, s.number).Scan(&holder)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !shared.DeadHere(holder)) {
			return nil
		}
		if err != nil {
			return dbErr(err)
		}
		s.log.Warn("taking over the "+st.what+" claim of a dead process on this host", "member", s.member, "holder", holder)
		out, err = s.claim(ctx, c, st, holder, dead)
		return err
	})
	return out, err
}

// deadHolders are the holders of the group's leases and of its claims of
// kind st that are processes on this host that have died.
func deadHolders(ctx context.Context, c *pgx.Conn, st claimStatements) ([]string, error) {
	rs, err := c.Query(ctx, st.holders)
	if err != nil {
		return nil, dbErr(err)
	}
	holders, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: read the holders of leases and %s claims: %w", st.what, dbErr(err))
	}
	return slices.DeleteFunc(holders, func(h string) bool { return !shared.DeadHere(h) }), nil
}

func (s *Store) claim(ctx context.Context, c *pgx.Conn, st claimStatements, dead string, deadOthers []string) ([]string, error) {
	rs, err := c.Query(ctx, st.claim, s.number, s.holder, s.leaseTTL.Microseconds(), dead, deadOthers)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: claim %ss of member %q: %w", st.what, s.member, dbErr(err))
	}
	return out, nil
}

// releaseClaim gives up this handle's claim of kind st on member's.
func (s *Store) releaseClaim(ctx context.Context, st claimStatements, member string) error {
	if s.member == "" {
		return fmt.Errorf("%w: release %s", ErrReadOnly, st.what)
	}
	return s.query(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, st.release, member, s.holder)
		return dbErr(err)
	})
}

// releaseClaims gives up every outbox, chain, share and share path claim of this
// handle, for Close.
func (s *Store) releaseClaims(ctx context.Context) error {
	var err error
	paths := claimStatements{what: "share path", releaseAll: s.sql.paths.releaseAll}
	for _, st := range []claimStatements{s.sql.outbox.claims, s.sql.chain.claims, s.sql.adopt.claims, paths} {
		if _, e := s.pool.Exec(ctx, st.releaseAll, s.holder); e != nil {
			err = errors.Join(err, fmt.Errorf("postgres store: release the %s claims of member %q: %w", st.what, s.member, e))
		}
	}
	return err
}
