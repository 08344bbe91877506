package redis

import (
	"context"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.ShareMembership = (*Store)(nil)

// JoinShare records in the shares hash that the member holds group's
// shared subscription, and in the sharesessions hash the session that
// holds it (this handle's lease holder and clientID); taking the lease
// clears the share. The handle keeps the group, and each renewal of the
// lease records it again if the hash lost it (a server without
// persistence, restarted), until the member is granted leave or quits.
// Also when the write failed: the member holds the subscription, and a
// renewal records it once the server answers.
func (s *Store) JoinShare(ctx context.Context, group, clientID string) error {
	if err := s.writer("join a share group"); err != nil {
		return err
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	s.share, s.shareSession = group, s.holder+"\n"+clientID
	if err := joinShareScript.Run(ctx, s.c, []string{s.k.shares, s.k.shareSessions, s.k.shareLost}, s.member, group, s.shareSession).Err(); err != nil {
		return s.fail("join a share group", err)
	}
	return nil
}

// QuitShare marks the member's share lost in the sharelost hash when it
// holds group in the shares hash (quitShareScript); renewals record it no
// more.
func (s *Store) QuitShare(ctx context.Context, group string) error {
	if err := s.writer("quit a share group"); err != nil {
		return err
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	if s.share == group {
		s.share = ""
	}
	if err := quitShareScript.Run(ctx, s.c, []string{s.k.shares, s.k.shareLost}, s.member, group).Err(); err != nil {
		return s.fail("quit a share group", err)
	}
	return nil
}

// LeaveShare grants the member leave from group when another member of
// group holds a live lease (leaveShareScript).
func (s *Store) LeaveShare(ctx context.Context, group string) (bool, error) {
	if err := s.writer("leave a share group"); err != nil {
		return false, err
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	members, err := s.c.HKeys(ctx, s.k.shares).Result()
	if err != nil {
		return false, s.fail("read the share groups", err)
	}
	keys := []string{s.k.shares, s.k.shareLost}
	args := []any{s.member, group}
	for _, m := range members {
		keys = append(keys, s.k.lease(m))
		args = append(args, m)
	}
	n, err := leaveShareScript.Run(ctx, s.c, keys, args...).Int()
	if err != nil {
		return false, s.fail("leave a share group", err)
	}
	if n == 1 && s.share == group {
		s.share = ""
	}
	return n == 1, nil
}
