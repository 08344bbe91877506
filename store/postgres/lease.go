package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

// takeLease gives the member its number (once ever) and takes its lease:
// when free or expired, or at once when its holder was a process on this
// host that has died.
func (s *Store) takeLease(ctx context.Context) error {
	s.holder = shared.NewHolder()
	if _, err := s.pool.Exec(ctx, s.sql.addMember, s.member); err != nil {
		return fmt.Errorf("postgres store: register member %q: %w", s.member, err)
	}
	expires, err := s.take(ctx, "")
	if errors.Is(err, pgx.ErrNoRows) {
		var old string
		var until time.Time
		if err := s.pool.QueryRow(ctx, s.sql.readLease, s.member).Scan(&old, &until); err != nil {
			return fmt.Errorf("postgres store: read the lease of member %q: %w", s.member, err)
		}
		if !shared.DeadHere(old) {
			return fmt.Errorf("%w: member %q is held by %q until %s", engine.ErrMemberHeld, s.member, old, until.Format(time.RFC3339Nano))
		}
		s.log.Warn("taking over the lease of a dead process on this host", "member", s.member, "holder", old)
		expires, err = s.take(ctx, old)
		if errors.Is(err, pgx.ErrNoRows) { // another process took it over first
			return fmt.Errorf("%w: member %q was taken over by another process", engine.ErrMemberHeld, s.member)
		}
	}
	if err != nil {
		return fmt.Errorf("postgres store: take the lease of member %q: %w", s.member, err)
	}
	s.stats.Leased(expires)
	s.log.Info("member lease taken", "member", s.member, "holder", s.holder, "number", s.number)
	return nil
}

// take makes this handle the member's holder, in one transaction: when the
// lease is free, expired or already this handle's, or, with dead set, when
// dead holds it; pgx.ErrNoRows when it may not. It first takes the
// migration lock shared and checks the schema's version again
// (checkVersionLocked), so that no migration comes between that check and
// the lease. The lease row is locked next, so that no renewal comes
// between the expiry read and the takeover; setting the holder waits for a
// batch of the old holder's to commit, as that batch holds the members row.
// It reads the server's clock as it sets the lease's expiry: the group's
// keys age by it from the first batch.
func (s *Store) take(ctx context.Context, dead string) (time.Time, error) {
	var expires time.Time
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if err := checkVersionLocked(ctx, tx, s.schema); err != nil {
			return err
		}
		var expired bool
		if err := tx.QueryRow(ctx, s.sql.lockLease, s.member).Scan(&expired); err != nil {
			return err
		}
		var err error
		if dead == "" {
			err = tx.QueryRow(ctx, s.sql.takeLease, s.member, s.holder, expired).Scan(&s.number)
		} else {
			err = tx.QueryRow(ctx, s.sql.takeOver, s.member, s.holder, dead).Scan(&s.number)
		}
		if err != nil {
			return err
		}
		sent := time.Now()
		if err := tx.QueryRow(ctx, s.sql.extend, s.member, s.leaseTTL.Microseconds()).Scan(&expires); err != nil {
			return err
		}
		s.stats.Clock(expires.Add(-s.leaseTTL), sent, time.Now()) // the expiry runs from the server's clock_timestamp()
		return nil
	})
	return expires, err
}

// renewLoop renews the lease every LeaseTTL/3 until Close, and every
// LeaseTTL/30 while renewals fail (shared.RenewLoop); after each renewal it
// ends the group's sessions left in a transaction (endAbandoned).
func (s *Store) renewLoop() {
	defer s.bg.Done()
	renew := func() error {
		if err := s.renew(); err != nil {
			return err
		}
		s.endAbandoned()
		return nil
	}
	shared.RenewLoop(s.bgCtx, s.leaseTTL/3, s.leaseTTL/30, renew, func(err error) {
		s.stats.LeaseFailed(err)
		s.log.Error("lease renewal failed", "member", s.member, "err", err)
	})
}

// renew extends the lease by LeaseTTL from the server's clock. It locks
// the lease row first and reads the holder after, in a statement of its
// own: a takeover holds that lock until it commits, and the holder a
// statement read before the wait is the old one, which a recheck of the
// locked row does not read again.
func (s *Store) renew() error {
	ctx, cancel := context.WithTimeout(s.bgCtx, s.leaseTTL/3) // Close cuts it short
	defer cancel()
	var expires, sent, received time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, s.sql.lockLease, s.member).Scan(new(bool)); err != nil {
			return err
		}
		sent = time.Now()
		err := tx.QueryRow(ctx, s.sql.renew, s.member, s.holder, s.leaseTTL.Microseconds()).Scan(&expires)
		received = time.Now()
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: member %q: this process lost its lease to another holder", engine.ErrMemberHeld, s.member)
	}
	if err != nil {
		return fmt.Errorf("postgres store: renew the lease of member %q: %w", s.member, err)
	}
	s.stats.Leased(expires)
	s.stats.Clock(expires.Add(-s.leaseTTL), sent, received) // the expiry runs from the server's clock_timestamp()
	return nil
}
