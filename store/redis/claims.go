package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/store/internal/shared"
)

// A claim hands one member's outbox (engine.OutboxClaimer) or chain
// (engine.ChainKeeper) to one handle at a time: a key per member and kind,
// holding the claimant's holder name, PX the lease TTL. Both kinds follow
// the same rules and run the same script.

// claimKind is one kind of claim.
type claimKind struct {
	what  string                              // "outbox" or "chain", for errors and logs
	claim func(k *keys, member string) string // the member's claim key
	// has is the key the claim script reads to learn whether a member has
	// something to hand over, by the script's test named test.
	has  func(k *keys, member string) string
	test string
}

var (
	// A member's outbox is handed over while it holds entries.
	outboxClaims = claimKind{what: "outbox", claim: (*keys).outboxClaim, has: (*keys).outboxIDs, test: "entries"}
	// A member's chain is handed over once it has one: a head.
	chainClaims = claimKind{what: "chain", claim: (*keys).chainClaim,
		has: func(k *keys, _ string) string { return k.heads }, test: "head"}
)

// claimScript takes or renews a handle's claims of one kind.
//
// KEYS, for each member (in ARGV order): its lease, its claim, the key
// that says whether it has something to hand over. ARGV[1] the holder,
// [2] the claims' PX milliseconds, [3] this handle's member, [4] a holder
// found dead whose claim of this member's may be taken ("" for none), [5]
// the test of that key: "entries", a sorted set with members (an outbox's
// ids), or "head", a hash with a field named by the member (the chain
// heads), [6] the holders of leases and claims found to be processes on
// this host that have died, one a line; from [7] the members.
//
// While this handle's member's lease is not another holder's (a handle
// fenced by another process claims nothing), a member is a candidate when
// it is this handle's, or when its lease is gone (or held by one of
// ARGV[6]) and it passes the test; its claim is taken when free, this
// holder's, one of ARGV[6]'s or (this member's only) ARGV[4]'s. Returns
// {the members claimed, in ARGV order; the holder of this member's claim
// when another holds it, else ""}.
var claimScript = goredis.NewScript(`
local out, other = {}, ''
local dead = {}
for h in string.gmatch(ARGV[6], '[^\n]+') do dead[h] = true end
for i = 7, #ARGV do
  if ARGV[i] == ARGV[3] then
    local lease = redis.call('GET', KEYS[3 * (i - 7) + 1])
    if lease and lease ~= ARGV[1] then return {out, other} end
  end
end
for i = 7, #ARGV do
  local j = 3 * (i - 7)
  local m = ARGV[i]
  local own = m == ARGV[3]
  local has
  if ARGV[5] == 'head' then
    has = redis.call('HEXISTS', KEYS[j + 3], m) == 1
  else
    has = redis.call('ZCARD', KEYS[j + 3]) > 0
  end
  local lease = redis.call('GET', KEYS[j + 1])
  if own or ((not lease or dead[lease]) and has) then
    local cur = redis.call('GET', KEYS[j + 2])
    if not cur or cur == ARGV[1] or (own and cur == ARGV[4]) or dead[cur] then
      redis.call('SET', KEYS[j + 2], ARGV[1], 'PX', ARGV[2])
      out[#out + 1] = m
    elseif own then
      other = cur
    end
  end
end
return {out, other}
`)

// claimEach takes or renews this handle's claims of kind k for ClaimTTL
// and returns the members claimed, sorted. A claim of this member's held
// by a process on this host that has died is taken over at once, as the
// lease is; so is another member's, when its lease or the claim is held by
// a process on this host that has died (an ingest killed with SIGKILL,
// whose member id no process will take again).
func (s *Store) claimEach(ctx context.Context, k claimKind) ([]string, error) {
	if err := s.writer("claim " + k.what + "s"); err != nil {
		return nil, err
	}
	members, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(members, s.member) {
		return nil, fmt.Errorf("redis store: member %q has no number in the group", s.member)
	}
	dead, err := s.deadHolders(ctx, k, members)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, 3*len(members))
	args := []any{s.holder, s.opts.LeaseTTL.Milliseconds(), s.member, "", k.test, strings.Join(dead, "\n")}
	for _, m := range members {
		keys = append(keys, s.k.lease(m), k.claim(&s.k, m), k.has(&s.k, m))
		args = append(args, m)
	}
	out, other, err := s.claim(ctx, k, keys, args)
	if err != nil || other == "" || !shared.DeadHere(other) {
		return out, err
	}
	s.log.Warn("taking over the "+k.what+" claim of a member process that no longer runs", "member", s.member, "holder", other)
	args[3] = other
	out, _, err = s.claim(ctx, k, keys, args)
	return out, err
}

// deadHolders are the holders of the members' leases and of their claims
// of kind k that are processes on this host that have died.
func (s *Store) deadHolders(ctx context.Context, k claimKind, members []string) ([]string, error) {
	names := make([]string, 0, 2*len(members))
	for _, m := range members {
		names = append(names, s.k.lease(m), k.claim(&s.k, m))
	}
	vals, err := s.c.MGet(ctx, names...).Result()
	if err != nil {
		return nil, s.fail("read the holders of leases and "+k.what+" claims", err)
	}
	var dead []string
	for _, v := range vals {
		if h, ok := v.(string); ok && h != "" && !slices.Contains(dead, h) && shared.DeadHere(h) {
			dead = append(dead, h)
		}
	}
	return dead, nil
}

// claim runs the claim script: the members claimed, and the holder of this
// member's claim when another holds it.
func (s *Store) claim(ctx context.Context, k claimKind, keys []string, args []any) ([]string, string, error) {
	res, err := claimScript.Run(ctx, s.c, keys, args...).Slice()
	if err != nil {
		return nil, "", s.fail("claim "+k.what+"s", err)
	}
	list, _ := res[0].([]any)
	out := make([]string, 0, len(list))
	for _, m := range list {
		m, _ := m.(string)
		out = append(out, m)
	}
	other, _ := res[1].(string)
	return out, other, nil
}

// releaseClaim gives up this handle's claim of kind k on member's.
func (s *Store) releaseClaim(ctx context.Context, k claimKind, member string) error {
	if err := s.writer("release " + k.what); err != nil {
		return err
	}
	if err := releaseScript.Run(ctx, s.c, []string{k.claim(&s.k, member)}, s.holder).Err(); err != nil {
		return s.fail("release the "+k.what+" claim of "+member, err)
	}
	return nil
}

// releaseClaims gives up every outbox, chain and share claim of this
// handle, for Close.
func (s *Store) releaseClaims(ctx context.Context) error {
	ms, err := s.c.HKeys(ctx, s.k.members).Result()
	if err != nil {
		return err
	}
	_, err = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, m := range ms {
			for _, k := range []claimKind{outboxClaims, chainClaims} {
				releaseScript.Eval(ctx, p, []string{k.claim(&s.k, m)}, s.holder)
			}
		}
		s.releaseAdoptions(ctx, p, ms)
		return nil
	})
	return err
}
