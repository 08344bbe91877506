package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.ShareAdopter = (*Store)(nil)

// adoptStatements are the SQL texts of the share claims of one schema
// (engine.ShareAdopter), kept in share_claims by the rules of the outbox
// and chain claims (claimStatements, whose release statements they use).
type adoptStatements struct {
	claims         claimStatements
	claim, adopted string
}

func newAdoptStatements(q func(string) string) adoptStatements {
	return adoptStatements{
		// No member has something of its own to hand over here: claim is
		// this kind's own statement.
		claims: newClaimStatements(q, "share", "share_claims", "false"),
		// The candidates, while this handle ($2) is its member's ($1)
		// lease holder: every other member recorded as holding share
		// group $4 on a session it named, whose lease is gone (given up,
		// expired, or held by one of $5, processes on this host found
		// dead), or whose share was marked lost at least $6 microseconds
		// ago (when $6 is positive). Each claim is taken when free,
		// expired, this holder's or held by one of $5; in member order,
		// so that two claimants never deadlock. The member rows are read,
		// not locked: a batch holds them.
		claim: q(`WITH cand AS (
				SELECT m.number FROM {s}.members m JOIN {s}.leases l USING (member)
				WHERE EXISTS (SELECT 1 FROM {s}.members WHERE number = $1 AND holder = $2)
				AND m.number <> $1 AND l.share = $4 AND l.share_client <> ''
				AND (m.holder = '' OR m.holder = ANY($5::text[]) OR l.expires < now()
					OR $6::bigint > 0 AND l.share_lost <= now() - $6::bigint * interval '1 microsecond')),
			claimed AS (
				INSERT INTO {s}.share_claims AS c (member, holder, expires)
				SELECT number, $2, now() + $3::bigint * interval '1 microsecond' FROM cand ORDER BY number
				ON CONFLICT (member) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
				WHERE c.holder = excluded.holder OR c.expires < now() OR c.holder = ANY($5::text[])
				RETURNING member)
			SELECT m.member, l.share_client, l.share_holder, l.share_lost
			FROM claimed JOIN {s}.members m ON m.number = claimed.member JOIN {s}.leases l ON l.member = m.member
			ORDER BY m.member`),
		// A member adopted leaves the group while this handle ($2) holds
		// its claim and its share is still the one adopted ($3, $4, $5,
		// lost at $6 or not lost): one that took its lease again since
		// has had it cleared, one that joined again recorded another
		// holder or cleared its loss, and one lost again since another
		// loss time.
		adopted: q(`UPDATE {s}.leases l SET share = '', share_lost = NULL
			FROM {s}.members m JOIN {s}.share_claims c ON c.member = m.number
			WHERE l.member = $1 AND m.member = l.member AND c.holder = $2 AND c.expires > now()
			AND l.share = $3 AND l.share_client = $4 AND l.share_holder = $5 AND l.share_lost IS NOT DISTINCT FROM $6
			RETURNING true`),
	}
}

// ClaimAdoptions takes or renews this handle's claims of the sessions of
// the gone members that hold group's subscription: a member whose lease
// ran out or was given up, or is held by a process on this host that has
// died (a member killed and not started again), or whose share has been
// marked lost for at least lost.
func (s *Store) ClaimAdoptions(ctx context.Context, group string, lost time.Duration) ([]engine.Adoption, error) {
	if s.member == "" {
		return nil, fmt.Errorf("%w: claim share sessions", ErrReadOnly)
	}
	var out []engine.Adoption
	err := s.query(ctx, func(c *pgx.Conn) error {
		dead, err := deadHolders(ctx, c, s.sql.adopt.claims)
		if err != nil {
			return err
		}
		rs, err := c.Query(ctx, s.sql.adopt.claim, s.number, s.holder, s.leaseTTL.Microseconds(), group, dead, lost.Microseconds())
		if err != nil {
			return dbErr(err)
		}
		out, err = pgx.CollectRows(rs, func(r pgx.CollectableRow) (engine.Adoption, error) {
			a := engine.Adoption{Group: group}
			var at *time.Time
			err := r.Scan(&a.Member, &a.ClientID, &a.Holder, &at)
			a.Lost = lostAt(at)
			return a, err
		})
		if err != nil {
			return fmt.Errorf("postgres store: claim the share sessions of group %q: %w", group, dbErr(err))
		}
		return nil
	})
	return out, err
}

// ShareAdopted clears a's member's share while this handle holds its
// claim and the share is still a's.
func (s *Store) ShareAdopted(ctx context.Context, a engine.Adoption) (bool, error) {
	if s.member == "" {
		return false, fmt.Errorf("%w: record a share session adopted", ErrReadOnly)
	}
	done := false
	err := s.query(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, s.sql.adopt.adopted, a.Member, s.holder, a.Group, a.ClientID, a.Holder, lostArg(a.Lost)).Scan(&done)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return dbErr(err)
	})
	if err != nil {
		return false, fmt.Errorf("postgres store: record the share session of %q adopted: %w", a.Member, err)
	}
	return done, nil
}

// ReleaseAdoption gives up this handle's claim of member's session.
func (s *Store) ReleaseAdoption(ctx context.Context, member string) error {
	return s.releaseClaim(ctx, s.sql.adopt.claims, member)
}

// lostAt is the loss time a row holds: zero when NULL.
func lostAt(at *time.Time) time.Time {
	if at == nil {
		return time.Time{}
	}
	return *at
}

// lostArg is the loss time lost as a statement's argument: NULL when zero.
func lostArg(lost time.Time) *time.Time {
	if lost.IsZero() {
		return nil
	}
	return &lost
}
