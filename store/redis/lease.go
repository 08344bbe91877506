package redis

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

// acquire reads the server's clock, which the group's keys age by from
// the first batch, then takes the member's lease and learns the member's
// number.
func (s *Store) acquire(ctx context.Context) error {
	if err := s.readClock(ctx); err != nil {
		return err
	}
	s.holder = shared.NewHolder()
	replace := ""
	for range 2 {
		res, err := acquireScript.Run(ctx, s.c, []string{s.k.lease(s.member), s.k.members, s.k.membersLast, s.k.shares, s.k.sharePaths(s.member),
			s.k.shareLost, s.k.sharePathsLost(s.member)},
			s.holder, s.opts.LeaseTTL.Milliseconds(), s.member, replace).Slice()
		if err != nil {
			return s.fail("take the member's lease", err)
		}
		if ok, _ := res[0].(int64); ok == 1 {
			n, _ := res[1].(int64)
			if n <= 0 || n >= 1<<23 {
				return fmt.Errorf("redis store: member %q has number %d, outside 1..2^23", s.member, n)
			}
			s.qbase = uint64(n) << 40
			s.stats.Leased(time.Now().Add(s.opts.LeaseTTL))
			return nil
		}
		holder, _ := res[1].(string)
		ms, _ := res[2].(int64)
		if replace == "" && shared.DeadHere(holder) {
			s.log.Warn("taking over the lease of a member process that no longer runs", "member", s.member, "holder", holder)
			replace = holder
			continue
		}
		until := time.Now().Add(time.Duration(ms) * time.Millisecond)
		return fmt.Errorf("%w: member %q is held by %q until %s (redis store %s)",
			engine.ErrMemberHeld, s.member, holder, until.UTC().Format(time.RFC3339), s.url)
	}
	return fmt.Errorf("%w: member %q: its lease changed hands while being taken over", engine.ErrMemberHeld, s.member)
}

// renew extends the lease; it reports the holder when another has it.
func (s *Store) renew(ctx context.Context) error {
	// Close marks the handle closed before it gives the lease up: a batch
	// whose script ran in between found no lease, and must not take it
	// back for a closed handle.
	if err := s.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.LeaseTTL/3)
	defer cancel()
	s.shareMu.Lock()
	group := s.share
	args := []any{s.holder, s.opts.LeaseTTL.Milliseconds(), s.member, group, s.shareSession}
	for _, path := range slices.Sorted(maps.Keys(s.paths)) {
		args = append(args, path, s.paths[path])
	}
	res, err := renewScript.Run(ctx, s.c, []string{s.k.lease(s.member), s.k.shares, s.k.shareSessions, s.k.sharePaths(s.member)}, args...).Slice()
	s.shareMu.Unlock()
	if err != nil {
		return s.fail("renew the member's lease", err)
	}
	if other, _ := res[0].(string); other != "" {
		return s.fenced(other)
	}
	if again, _ := res[1].(int64); again == 1 {
		s.log.Warn("the store had lost the record that this member holds its share group's subscription (a server without persistence, restarted?): recorded it again",
			"member", s.member, "group", group)
	}
	if paths, _ := res[2].(int64); paths > 0 {
		s.log.Warn("the store had lost the record that this member holds its share group's subscription on its paths (a server without persistence, restarted?): recorded it again",
			"member", s.member, "paths", paths)
	}
	s.stats.Leased(time.Now().Add(s.opts.LeaseTTL))
	if err := s.readClock(ctx); err != nil {
		s.log.Warn("reading the server's clock failed: the group's keys age from the last reading by this process's monotonic clock", "err", err)
	}
	return nil
}

// readClock reads the server's clock (TIME), which the lease runs out by
// and the group's keys age by.
func (s *Store) readClock(ctx context.Context) error {
	sent := time.Now()
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return s.fail("read the server's clock", err)
	}
	s.stats.Clock(now, sent, time.Now())
	return nil
}

// fenced is the error of a handle whose lease another holder has taken.
func (s *Store) fenced(holder string) error {
	return fmt.Errorf("%w: member %q: this process's lease was taken by %q; nothing was written",
		engine.ErrMemberHeld, s.member, holder)
}

// renewLoop renews the lease every LeaseTTL/3 until ctx ends, and every
// LeaseTTL/30 while renewals fail (shared.RenewLoop).
func (s *Store) renewLoop(ctx context.Context) {
	defer s.tasks.Done()
	shared.RenewLoop(ctx, s.opts.LeaseTTL/3, s.opts.LeaseTTL/30, func() error { return s.renew(ctx) }, func(err error) {
		s.stats.LeaseFailed(err)
		s.log.Error("lease renewal failed", "member", s.member, "err", err)
	})
}
