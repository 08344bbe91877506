package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.SharePaths = (*Store)(nil)

// pathStatements are the SQL texts of the shares of the members' paths
// (engine.SharePaths), one row a member and path in share_paths (schema
// version 14), and of their claims in share_path_claims, by the rules of
// a member's one session (adoptStatements), path by path.
type pathStatements struct {
	join, quit          string
	claim, adopted      string
	release, releaseAll string
	holders             string // every holder of a lease or of a path claim
}

func newPathStatements(q func(string) string) pathStatements {
	return pathStatements{
		join: q(`INSERT INTO {s}.share_paths AS p (member, path, share, client, holder, brokers, filters)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (member, path) DO UPDATE SET share = excluded.share, client = excluded.client,
				holder = excluded.holder, brokers = excluded.brokers, filters = excluded.filters, lost = NULL`),
		// A share lost stays recorded, marked at the store's time of its
		// first loss, as a member's one session's (newStatements).
		quit: q(`UPDATE {s}.share_paths SET lost = coalesce(lost, clock_timestamp()) WHERE member = $1 AND path = $2 AND share = $3`),
		// The candidates, while this handle ($2) is its member's ($1)
		// lease holder: every other member recorded as holding share
		// group $4 on path $6, whose lease is gone (given up, expired, or
		// held by one of $5, processes on this host found dead), or whose
		// share there was marked lost at least $7 microseconds ago (when
		// $7 is positive). Each
		// claim is taken when free, expired, this holder's or held by one
		// of $5; in member order, so that two claimants never deadlock.
		claim: q(`WITH cand AS (
				SELECT m.number FROM {s}.members m JOIN {s}.leases l USING (member) JOIN {s}.share_paths p USING (member)
				WHERE EXISTS (SELECT 1 FROM {s}.members WHERE number = $1 AND holder = $2)
				AND m.number <> $1 AND p.path = $6 AND p.share = $4 AND p.client <> ''
				AND (m.holder = '' OR m.holder = ANY($5::text[]) OR l.expires < now()
					OR $7::bigint > 0 AND p.lost <= now() - $7::bigint * interval '1 microsecond')),
			claimed AS (
				INSERT INTO {s}.share_path_claims AS c (member, path, holder, expires)
				SELECT number, $6, $2, now() + $3::bigint * interval '1 microsecond' FROM cand ORDER BY number
				ON CONFLICT (member, path) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
				WHERE c.holder = excluded.holder OR c.expires < now() OR c.holder = ANY($5::text[])
				RETURNING member)
			SELECT m.member, p.client, p.holder, p.brokers, p.filters, p.lost
			FROM claimed JOIN {s}.members m ON m.number = claimed.member
			JOIN {s}.share_paths p ON p.member = m.member AND p.path = $6
			ORDER BY m.member`),
		// A member adopted on a path leaves the group there while this
		// handle ($2) holds its claim and its share is still the one
		// adopted ($3, $4, $5, lost at $7 or not lost): one that took its
		// lease again since has had it cleared, one that joined again
		// recorded another holder or cleared its loss, and one lost again
		// since another loss time.
		adopted: q(`DELETE FROM {s}.share_paths p
			USING {s}.members m, {s}.share_path_claims c
			WHERE p.member = $1 AND p.path = $6 AND m.member = p.member AND c.member = m.number AND c.path = p.path
			AND c.holder = $2 AND c.expires > now()
			AND p.share = $3 AND p.client = $4 AND p.holder = $5 AND p.lost IS NOT DISTINCT FROM $7
			RETURNING true`),
		release: q(`UPDATE {s}.share_path_claims SET holder = '', expires = '-infinity'
			WHERE member = (SELECT number FROM {s}.members WHERE member = $1) AND path = $3 AND holder = $2`),
		releaseAll: q(`UPDATE {s}.share_path_claims SET holder = '', expires = '-infinity' WHERE holder = $1`),
		holders: q(`SELECT holder FROM {s}.members WHERE holder <> ''
			UNION SELECT holder FROM {s}.share_path_claims WHERE holder <> ''`),
	}
}

// JoinSharePath records in share_paths that the member holds p.Group's
// subscription on path p.Path, on the session of p.ClientID, recorded by
// this handle's lease holder; taking the lease clears it.
func (s *Store) JoinSharePath(ctx context.Context, p engine.SharePath) error {
	if s.member == "" {
		return fmt.Errorf("%w: join a share group on a path", ErrReadOnly)
	}
	_, err := s.pool.Exec(ctx, s.sql.paths.join, s.member, p.Path, p.Group, p.ClientID, s.holder, nonNil(p.Brokers), nonNil(p.Filters))
	if err != nil {
		return fmt.Errorf("postgres store: member %q joins share group %q on path %q: %w", s.member, p.Group, p.Path, err)
	}
	return nil
}

// QuitSharePath marks the member's share of path lost when it is group's.
func (s *Store) QuitSharePath(ctx context.Context, path, group string) error {
	if s.member == "" {
		return fmt.Errorf("%w: quit a share group on a path", ErrReadOnly)
	}
	if _, err := s.pool.Exec(ctx, s.sql.paths.quit, s.member, path, group); err != nil {
		return fmt.Errorf("postgres store: member %q quits share group %q on path %q: %w", s.member, group, path, err)
	}
	return nil
}

// PathAdopter returns the adoption of the members' sessions on path.
func (s *Store) PathAdopter(path string) engine.ShareAdopter { return &pathAdopter{s: s, path: path} }

// pathAdopter is the engine.ShareAdopter of the members' sessions on one
// path.
type pathAdopter struct {
	s    *Store
	path string
}

// ClaimAdoptions takes or renews this handle's claims of the sessions on
// the path of the gone members that hold group's subscription there, and
// of those whose share there has been marked lost for at least lost.
func (a *pathAdopter) ClaimAdoptions(ctx context.Context, group string, lost time.Duration) ([]engine.Adoption, error) {
	s := a.s
	if s.member == "" {
		return nil, fmt.Errorf("%w: claim share sessions on a path", ErrReadOnly)
	}
	var out []engine.Adoption
	err := s.query(ctx, func(c *pgx.Conn) error {
		dead, err := deadHolders(ctx, c, claimStatements{what: "share path", holders: s.sql.paths.holders})
		if err != nil {
			return err
		}
		rs, err := c.Query(ctx, s.sql.paths.claim, s.number, s.holder, s.leaseTTL.Microseconds(), group, dead, a.path, lost.Microseconds())
		if err != nil {
			return dbErr(err)
		}
		out, err = pgx.CollectRows(rs, func(r pgx.CollectableRow) (engine.Adoption, error) {
			ad := engine.Adoption{Group: group, Path: a.path}
			var at *time.Time
			err := r.Scan(&ad.Member, &ad.ClientID, &ad.Holder, &ad.Brokers, &ad.Filters, &at)
			ad.Lost = lostAt(at)
			return ad, err
		})
		if err != nil {
			return fmt.Errorf("postgres store: claim the share sessions of group %q on path %q: %w", group, a.path, dbErr(err))
		}
		return nil
	})
	return out, err
}

// ShareAdopted removes ad's member's share of the path while this handle
// holds its claim and the share is still ad's.
func (a *pathAdopter) ShareAdopted(ctx context.Context, ad engine.Adoption) (bool, error) {
	s := a.s
	if s.member == "" {
		return false, fmt.Errorf("%w: record a share session adopted", ErrReadOnly)
	}
	done := false
	err := s.query(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, s.sql.paths.adopted, ad.Member, s.holder, ad.Group, ad.ClientID, ad.Holder, a.path, lostArg(ad.Lost)).Scan(&done)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return dbErr(err)
	})
	if err != nil {
		return false, fmt.Errorf("postgres store: record the share session of %q on path %q adopted: %w", ad.Member, a.path, err)
	}
	return done, nil
}

// ReleaseAdoption gives up this handle's claim of member's session on the
// path.
func (a *pathAdopter) ReleaseAdoption(ctx context.Context, member string) error {
	s := a.s
	if s.member == "" {
		return fmt.Errorf("%w: release a share session", ErrReadOnly)
	}
	return s.query(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, s.sql.paths.release, member, s.holder, a.path)
		return dbErr(err)
	})
}

// nonNil is list, or an empty list for nil: the columns are NOT NULL.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
