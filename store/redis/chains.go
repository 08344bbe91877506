package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

// What audit retention and the audit sinks need of each member's chain
// (engine.ChainKeeper): its base, its trim, the sinks' cursors on it, and
// the claims that hand a departed member's chain to one live handle
// (claims.go). The keys are in keys.go.

var _ engine.ChainKeeper = (*Store)(nil)

// trimScript drops the records of a member's chain below a position and
// records the chain's new base, after checking, before any write, that the
// base is the stored record below that position and that no open
// quarantine entry of the member holds a record it drops. The batch that
// straddles the position is stored again from it on, under it.
//
// KEYS[1] the chain heads, [2] the chain bases, [3] the member's chain,
// [4] its chain index, [5] the quarantine ids, [6] the chain's claim.
// ARGV[1] the member, [2] below, [3] the base's position, [4] its hash in
// hex, [5] and [6] the bounds of the member's quarantine ids that refuse
// the trim, as ZRANGEBYLEX takes them; [7] the base as the chain bases
// hold it; [8] this handle's holder name.
//
// Returns {"ok"}; {"claimed", holder} when another handle holds the
// chain's claim; {"base", old base position, head position} when the
// positions do not fit; {"record", why} when the stored record at the
// base's position is missing or has another hash; {"held", hex id} for an
// open quarantine entry in the way.
var trimScript = goredis.NewScript(`
local below, bpos = tonumber(ARGV[2]), tonumber(ARGV[3])
local function pos(v)
  if not v then return 0 end
  return tonumber(string.match(v, '^%d+'))
end
local claim = redis.call('GET', KEYS[6])
if claim and claim ~= '' and claim ~= ARGV[8] then return {'claimed', claim} end
local head, old = pos(redis.call('HGET', KEYS[1], ARGV[1])), pos(redis.call('HGET', KEYS[2], ARGV[1]))
if below ~= bpos + 1 or bpos <= old or bpos > head then return {'base', tostring(old), tostring(head)} end
local held = redis.call('ZRANGEBYLEX', KEYS[5], ARGV[5], ARGV[6], 'LIMIT', 0, 1)[1]
if held then return {'held', held} end
-- line returns where the n-th line of s (from 0) starts, nil past the last.
local function line(s, n)
  local i = 1
  for _ = 1, n do
    i = string.find(s, '\n', i, true)
    if not i then return nil end
    i = i + 1
  end
  return i
end
local first = redis.call('ZREVRANGEBYSCORE', KEYS[4], bpos, '-inf', 'LIMIT', 0, 1)[1]
local blob = first and redis.call('HGET', KEYS[3], first)
local at = blob and line(blob, bpos - tonumber(first))
if not at then return {'record', 'missing'} end
local stop = string.find(blob, '\n', at, true)
local ok, rec = pcall(cjson.decode, string.sub(blob, at, (stop or 0) - 1))
if not ok or rec.position ~= bpos or rec.hash ~= ARGV[4] then return {'record', 'hash'} end
if stop then -- the batch goes on past the base: its records from below stay
  redis.call('HSET', KEYS[3], below, string.sub(blob, stop + 1))
  redis.call('ZADD', KEYS[4], below, below)
end
while true do
  local starts = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. below, 'LIMIT', 0, 1000)
  if #starts == 0 then break end
  redis.call('HDEL', KEYS[3], unpack(starts))
  redis.call('ZREM', KEYS[4], unpack(starts))
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[7])
return {'ok'}
`)

// ChainBase returns the last dropped record of member's chain; zero when
// none was dropped or the member has no chain.
func (s *Store) ChainBase(ctx context.Context, member string) (engine.AuditHead, error) {
	if err := s.check(); err != nil {
		return engine.AuditHead{}, err
	}
	v, err := s.c.HGet(ctx, s.k.chainBases, member).Result()
	if errors.Is(err, goredis.Nil) {
		return engine.AuditHead{}, nil
	}
	if err != nil {
		return engine.AuditHead{}, s.fail("read the chain base of "+member, err)
	}
	h, err := decodeHead(v)
	if err != nil {
		return engine.AuditHead{}, fmt.Errorf("redis store: the base of member %q: %w", member, err)
	}
	return h, nil
}

// TrimChain drops the records of member's chain below below and makes base
// its base, in one script; see engine.ChainKeeper. Any member's handle may
// trim any member's chain. A read-only handle fails.
func (s *Store) TrimChain(ctx context.Context, member string, below uint64, base engine.AuditHead) error {
	if err := s.writer("trim chain"); err != nil {
		return err
	}
	n, err := s.c.HGet(ctx, s.k.members, member).Uint64()
	if errors.Is(err, goredis.Nil) {
		return fmt.Errorf("%w: redis store: the group has no member %q", engine.ErrTrimBase, member)
	}
	if err != nil {
		return s.fail("read the number of member "+member, err)
	}
	qbase := n << 40
	keys := []string{s.k.heads, s.k.chainBases, s.k.chain(member), s.k.chainIndex(member), s.k.quarIDs, s.k.chainClaim(member)}
	res, err := trimScript.Run(ctx, s.c, keys, member, below, base.Position, base.Hash.String(),
		"("+quarantineID(qbase), "("+quarantineID(qbase+min(below, 1<<40)), encodeHead(base), s.holder).StringSlice()
	if err != nil {
		return s.fail("trim the chain of "+member, err)
	}
	switch res[0] {
	case "ok":
		return nil
	case "claimed":
		return fmt.Errorf("%w: redis store: member %q's, by %s", engine.ErrChainClaimed, member, res[1])
	case "base":
		return fmt.Errorf("%w: redis store: member %q: base at position %d for a trim below %d, with the stored chain after %s up to %s",
			engine.ErrTrimBase, member, base.Position, below, res[1], res[2])
	case "record":
		return fmt.Errorf("%w: redis store: member %q: the stored record at position %d: %s", engine.ErrTrimBase, member, base.Position, res[1])
	case "held":
		id, _ := strconv.ParseUint(res[1], 16, 64)
		return fmt.Errorf("%w: redis store: member %q: entry %d", engine.ErrTrimQuarantine, member, id)
	}
	return fmt.Errorf("redis store: the trim script answered %q", res)
}

// ChainCursor returns sink's cursor on member's chain; 0 when none.
func (s *Store) ChainCursor(ctx context.Context, member, sink string) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	pos, err := s.c.HGet(ctx, s.k.chainCursors(member), sink).Uint64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, s.fail("read the cursor of "+sink+" on the chain of "+member, err)
	}
	return pos, nil
}

// ChainCursors returns every cursor stored on member's chain, by sink.
func (s *Store) ChainCursors(ctx context.Context, member string) (map[string]uint64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	all, err := s.c.HGetAll(ctx, s.k.chainCursors(member)).Result()
	if err != nil {
		return nil, s.fail("read the cursors on the chain of "+member, err)
	}
	out := make(map[string]uint64, len(all))
	for sink, v := range all {
		pos, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis store: the cursor of sink %q on the chain of %s is %q", sink, member, v)
		}
		out[sink] = pos
	}
	return out, nil
}

// ForgetSink drops sink's cursor on every member's chain and returns the
// members whose chain had one, sorted. Each chain's cursor goes in a
// command of its own: run again, it finishes what a failure left.
func (s *Store) ForgetSink(ctx context.Context, sink string) ([]string, error) {
	if err := s.writer("forget a sink"); err != nil {
		return nil, err
	}
	members, err := s.c.HKeys(ctx, s.k.members).Result()
	if err != nil {
		return nil, s.fail("read the members", err)
	}
	slices.Sort(members)
	var had []string
	for _, m := range members {
		n, err := s.c.HDel(ctx, s.k.chainCursors(m), sink).Result()
		if err != nil {
			return had, s.fail("drop the cursor of "+sink+" on the chain of "+m, err)
		}
		if n > 0 {
			had = append(had, m)
		}
	}
	return had, nil
}

// setCursorScript moves a sink's cursor on a member's chain forward, never
// back: KEYS[1] the members, KEYS[2] the chain's cursors; ARGV[1] the
// member, ARGV[2] the sink, ARGV[3] the position. Returns 0, or -1 when
// the group has no such member.
var setCursorScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if tonumber(ARGV[3]) > cur then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) end
return 0
`)

// SetChainCursor records pos as sink's cursor on member's chain, unless
// the cursor is already past it: a process whose claim of the chain ended
// while it delivered cannot take the cursor back from the one that claimed
// the chain next. A member the group never had fails it with
// engine.ErrNotFound; a read-only handle fails.
func (s *Store) SetChainCursor(ctx context.Context, member, sink string, pos uint64) error {
	if err := s.writer("set chain cursor"); err != nil {
		return err
	}
	n, err := setCursorScript.Run(ctx, s.c, []string{s.k.members, s.k.chainCursors(member)}, member, sink, pos).Int()
	if err != nil {
		return s.fail("write the cursor of "+sink+" on the chain of "+member, err)
	}
	if n < 0 {
		return fmt.Errorf("%w: redis store: set the cursor of sink %q: the group has no member %q", engine.ErrNotFound, sink, member)
	}
	return nil
}

// setCursorAtScript is setCursorScript only if the chain holds the record
// whose hash is ARGV[4] at ARGV[3]: KEYS[3] the chain's index, KEYS[4] its
// batches of records, one JSON a line, each beginning with its position
// (the line is found with plain string searches, not a pattern per line:
// a batch of ingest holds a thousand).
// Returns 0, -1 when the group has no such member, or -2 when the chain
// holds another record there, or none.
var setCursorAtScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
local starts = redis.call('ZREVRANGEBYSCORE', KEYS[3], ARGV[3], '-inf', 'LIMIT', 0, 1)
if #starts == 0 then return -2 end
local blob = redis.call('HGET', KEYS[4], starts[1])
if not blob then return -2 end
local head = '{"position":' .. ARGV[3] .. ','
local at = 1
if string.sub(blob, 1, #head) ~= head then
	at = string.find(blob, '\n' .. head, 1, true)
	if not at then return -2 end
	at = at + 1
end
local stop = string.find(blob, '\n', at, true) or #blob + 1
if not string.find(string.sub(blob, at, stop - 1), '"hash":"' .. ARGV[4] .. '"', 1, true) then return -2 end
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if tonumber(ARGV[3]) > cur then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) end
return 0
`)

// SetChainCursorAt records at.Position as sink's cursor on member's chain,
// as SetChainCursor does, only if the chain holds the record at (its hash)
// there, in one script; engine.ErrCursorRecord otherwise.
func (s *Store) SetChainCursorAt(ctx context.Context, member, sink string, at engine.AuditHead) error {
	if err := s.writer("set chain cursor"); err != nil {
		return err
	}
	n, err := setCursorAtScript.Run(ctx, s.c, []string{s.k.members, s.k.chainCursors(member), s.k.chainIndex(member), s.k.chain(member)},
		member, sink, at.Position, at.Hash.String()).Int()
	if err != nil {
		return s.fail("write the cursor of "+sink+" on the chain of "+member, err)
	}
	switch n {
	case -1:
		return fmt.Errorf("%w: redis store: set the cursor of sink %q: the group has no member %q", engine.ErrNotFound, sink, member)
	case -2:
		return fmt.Errorf("%w: redis store: sink %q, position %d of member %q's chain", engine.ErrCursorRecord, sink, at.Position, member)
	}
	return nil
}

// ClaimChains takes or renews this handle's chain claims for ClaimTTL: its
// own member's, and that of every member with a chain whose lease is gone;
// see engine.ChainKeeper. A claim of this member's chain held by a process
// on this host that has died is taken over at once, as the lease is.
func (s *Store) ClaimChains(ctx context.Context) ([]string, error) {
	return s.claimEach(ctx, chainClaims)
}

// ReleaseChain gives up this handle's claim of member's chain.
func (s *Store) ReleaseChain(ctx context.Context, member string) error {
	return s.releaseClaim(ctx, chainClaims, member)
}
