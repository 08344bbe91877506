package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

var _ engine.ShareAdopter = (*Store)(nil)

// ClaimAdoptions takes or renews this handle's claims of the sessions of
// the gone members that hold group's subscription (adoptClaimScript): a
// member whose lease ran out or was given up, or whose lease or claim is
// held by a process on this host that has died, or whose share has been
// marked lost for at least lost.
func (s *Store) ClaimAdoptions(ctx context.Context, group string, lost time.Duration) ([]engine.Adoption, error) {
	if err := s.writer("claim share sessions"); err != nil {
		return nil, err
	}
	members, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, 2*len(members))
	for _, m := range members {
		names = append(names, s.k.lease(m), s.k.shareClaim(m))
	}
	dead, err := s.deadOf(ctx, names)
	if err != nil {
		return nil, err
	}
	keys := []string{s.k.shares, s.k.shareSessions, s.k.shareLost}
	args := []any{s.holder, s.opts.LeaseTTL.Milliseconds(), s.member, group, strings.Join(dead, "\n"), max(0, lost.Milliseconds())}
	for _, m := range members {
		keys = append(keys, s.k.lease(m), s.k.shareClaim(m))
		args = append(args, m)
	}
	res, err := adoptClaimScript.Run(ctx, s.c, keys, args...).StringSlice()
	if err != nil {
		return nil, s.fail("claim share sessions", err)
	}
	var out []engine.Adoption
	for i := 0; i+2 < len(res); i += 3 {
		holder, client, _ := strings.Cut(res[i+1], "\n")
		at, err := lostAt(res[i+2])
		if err != nil {
			return out, fmt.Errorf("redis store: claim share sessions: member %q: %w", res[i], err)
		}
		out = append(out, engine.Adoption{Member: res[i], Group: group, ClientID: client, Holder: holder, Lost: at})
	}
	return out, nil
}

// deadOf returns the values of the keys names (holders) that name
// processes on this host that have died, each once.
func (s *Store) deadOf(ctx context.Context, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	vals, err := s.c.MGet(ctx, names...).Result()
	if err != nil {
		return nil, s.fail("read the holders of leases and share claims", err)
	}
	var dead []string
	for _, v := range vals {
		if h, ok := v.(string); ok && h != "" && !slices.Contains(dead, h) && shared.DeadHere(h) {
			dead = append(dead, h)
		}
	}
	return dead, nil
}

// ShareAdopted removes a's member from the shares hash while this handle
// holds its share claim and its share is still a's (shareAdoptedScript).
func (s *Store) ShareAdopted(ctx context.Context, a engine.Adoption) (bool, error) {
	if err := s.writer("record a share session adopted"); err != nil {
		return false, err
	}
	n, err := shareAdoptedScript.Run(ctx, s.c, []string{s.k.shares, s.k.shareSessions, s.k.shareClaim(a.Member), s.k.shareLost},
		s.holder, a.Member, a.Group, a.Holder+"\n"+a.ClientID, lostArg(a.Lost)).Int()
	if err != nil {
		return false, s.fail(fmt.Sprintf("record the share session of %q adopted", a.Member), err)
	}
	return n == 1, nil
}

// ReleaseAdoption gives up this handle's claim of member's session.
func (s *Store) ReleaseAdoption(ctx context.Context, member string) error {
	if err := s.writer("release a share session"); err != nil {
		return err
	}
	if err := releaseScript.Run(ctx, s.c, []string{s.k.shareClaim(member)}, s.holder).Err(); err != nil {
		return s.fail("release the share session claim of "+member, err)
	}
	return nil
}

// releaseAdoptions gives up every share claim of this handle, for Close.
func (s *Store) releaseAdoptions(ctx context.Context, p goredis.Pipeliner, members []string) {
	for _, m := range members {
		releaseScript.Eval(ctx, p, []string{s.k.shareClaim(m)}, s.holder)
	}
	s.releasePathAdoptions(ctx, p, members)
}

// lostAt reads when a share was marked lost, milliseconds of the server's
// clock as the scripts write them: zero for "".
func lostAt(ms string) (time.Time, error) {
	if ms == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("its share's loss time %q is not milliseconds", ms)
	}
	return time.UnixMilli(n), nil
}

// lostArg is a loss time as the scripts write it: "" for zero.
func lostArg(lost time.Time) string {
	if lost.IsZero() {
		return ""
	}
	return strconv.FormatInt(lost.UnixMilli(), 10)
}
