package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.ShareMembership = (*Store)(nil)

// JoinShare records in the member's lease row that it holds group's shared
// subscription, on the session of clientID, recorded by this handle's
// lease holder; taking the lease clears it.
func (s *Store) JoinShare(ctx context.Context, group, clientID string) error {
	if s.member == "" {
		return fmt.Errorf("%w: join a share group", ErrReadOnly)
	}
	if _, err := s.pool.Exec(ctx, s.sql.joinShare, s.member, group, clientID, s.holder); err != nil {
		return fmt.Errorf("postgres store: member %q joins share group %q: %w", s.member, group, err)
	}
	return nil
}

// QuitShare clears the member's share when it is group: it may no longer
// hold group's subscription.
func (s *Store) QuitShare(ctx context.Context, group string) error {
	if s.member == "" {
		return fmt.Errorf("%w: quit a share group", ErrReadOnly)
	}
	if _, err := s.pool.Exec(ctx, s.sql.quitShare, s.member, group); err != nil {
		return fmt.Errorf("postgres store: member %q quits share group %q: %w", s.member, group, err)
	}
	return nil
}

// LeaveShare grants the member leave from group, and clears its share,
// when another member whose lease is live holds group's subscription, in
// one transaction under the schema's advisory lock of share groups.
func (s *Store) LeaveShare(ctx context.Context, group string) (bool, error) {
	if s.member == "" {
		return false, fmt.Errorf("%w: leave a share group", ErrReadOnly)
	}
	granted := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.lockShares); err != nil {
			return err
		}
		return tx.QueryRow(ctx, s.sql.leaveShare, s.member, group).Scan(&granted)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("postgres store: member %q leaves share group %q: %w", s.member, group, err)
	}
	return granted, nil
}
