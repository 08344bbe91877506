package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

// The outbox's keys, one set per member, none of which expires but the
// claims (see keys.go for the rest):
//
//	P outbox:<member>      hash: 16 hex digits of the id → entry JSON (payload base64)
//	P outboxids:<member>   sorted set, all scores 0: the same hex ids, in id order
//	P outboxheld:<member>  hash: hex id → "<n>:" n bytes of reason, then the entry JSON
//	P outboxclaim:<member> string: the holder whose drainer may drain the outbox, PX the lease TTL
func (k *keys) outbox(member string) string      { return k.prefix + "outbox:" + member }
func (k *keys) outboxIDs(member string) string   { return k.prefix + "outboxids:" + member }
func (k *keys) outboxHeld(member string) string  { return k.prefix + "outboxheld:" + member }
func (k *keys) outboxClaim(member string) string { return k.prefix + "outboxclaim:" + member }

var (
	_ engine.OutboxStore   = (*Store)(nil)
	_ engine.OutboxClaimer = (*Store)(nil)
)

// outboxWrites is the update script's part that writes the outbox, after
// every check passed and the quarantine was written: p is then where the
// resolved ids start in ARGV. Its ARGV follow them: the number of entries,
// of holds and of resolutions, (hex id, JSON) of each entry, (hex id,
// reason, "1" for an operator's hold of an entry it read pending or "0")
// of each hold, (hex id, "1" to requeue or "0" to drop) of each
// resolution. Its KEYS come just before the row locks: this member's
// outbox and outbox ids, then for each hold and then each resolution the
// outbox, ids and held entries of the member it names. A batch without
// entries, holds or resolutions passes none of it. Resolutions go first:
// a requeued entry gets back the JSON it was written with.
const outboxWrites = `
local o = p + nr
if o < hm then
  local ne, nh, nv = tonumber(a[o]), tonumber(a[o + 1]), tonumber(a[o + 2])
  local k = #KEYS - nl - 2 - 3 * nh - 3 * nv
  o = o + 3
  local ro, rk = o + 2 * ne + 3 * nh, k + 3 + 3 * nh
  for i = 0, nv - 1 do
    local ob, ids, held = KEYS[rk + 3 * i], KEYS[rk + 1 + 3 * i], KEYS[rk + 2 + 3 * i]
    local id = a[ro + 2 * i]
    if a[ro + 2 * i + 1] == '1' then
      local v = redis.call('HGET', held, id)
      local n = string.match(v, '^%d+')
      redis.call('HSET', ob, id, string.sub(v, #n + 2 + tonumber(n)))
      redis.call('ZADD', ids, 0, id)
    end
    redis.call('HDEL', held, id)
  end
  for i = 0, ne - 1, 500 do
    local m = math.min(500, ne - i)
    redis.call('HSET', KEYS[k + 1], unpack(a, o + 2 * i, o + 2 * (i + m) - 1))
    local z = {}
    for j = 0, m - 1 do
      z[2 * j + 1] = 0
      z[2 * j + 2] = a[o + 2 * (i + j)]
    end
    redis.call('ZADD', KEYS[k + 2], unpack(z))
  end
  o = o + 2 * ne
  for i = 0, nh - 1 do
    local ob, ids, held = KEYS[k + 3 + 3 * i], KEYS[k + 4 + 3 * i], KEYS[k + 5 + 3 * i]
    local id, reason = a[o + 3 * i], a[o + 3 * i + 1]
    local e = redis.call('HGET', ob, id)
    if e then
      redis.call('HSET', held, id, #reason .. ':' .. reason .. e)
      redis.call('HDEL', ob, id)
      redis.call('ZREM', ids, id)
    end
  end
end
`

// outboxChecks is the update script's part that checks, with the other
// checks and before any write, that every entry the batch resolves is
// held, and every entry an operator holds (Pending) still pending: r0 + nr
// is where outboxWrites' ARGV start. Returns {"notheld", the resolution's
// index from 0} or {"notpending", the hold's index from 0} for one that
// is not. hm is where the held index's ARGV start, after the outbox's.
const outboxChecks = `
local oc = r0 + nr
if oc < hm then
  local ne, nh, nv = tonumber(a[oc]), tonumber(a[oc + 1]), tonumber(a[oc + 2])
  local ho, ro, rk = oc + 3 + 2 * ne, oc + 3 + 2 * ne + 3 * nh, #KEYS - nl - 3 * nv
  for i = 0, nh - 1 do
    if a[ho + 3 * i + 2] == '1' and redis.call('HEXISTS', KEYS[rk - 3 * nh + 1 + 3 * i], a[ho + 3 * i]) == 0 then
      return {'notpending', tostring(i)}
    end
  end
  for i = 0, nv - 1 do
    if redis.call('HEXISTS', KEYS[rk + 3 + 3 * i], a[ro + 2 * i]) == 0 then return {'notheld', tostring(i)} end
  end
end
`

// notHeld is the error of the update script's {"notheld", index} answer.
func notHeld(b *engine.Batch, index string) error {
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || i >= len(b.OutboxResolved) {
		return fmt.Errorf("redis store: the update script answered notheld %q for %d resolutions", index, len(b.OutboxResolved))
	}
	r := b.OutboxResolved[i]
	return fmt.Errorf("%w: outbox entry %d of member %q is not held; nothing was written", engine.ErrNotFound, r.ID, r.Member)
}

// notPending is the error of the update script's {"notpending", index}
// answer: an operator's hold of an entry the drainer delivered meanwhile.
func notPending(b *engine.Batch, index string) error {
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || i >= len(b.OutboxHeld) {
		return fmt.Errorf("redis store: the update script answered notpending %q for %d holds", index, len(b.OutboxHeld))
	}
	h := b.OutboxHeld[i]
	return fmt.Errorf("%w: outbox entry %d of member %q is no longer pending (delivered meanwhile); nothing was written", engine.ErrNotFound, h.ID, h.Member)
}

// outboxArgs appends the batch's outbox writes to the update script's KEYS
// (before the row locks) and ARGV (last); a batch without entries, holds
// or resolutions appends nothing.
func (s *Store) outboxArgs(b *engine.Batch, keys []string, args []any) ([]string, []any, error) {
	if len(b.Outbox) == 0 && len(b.OutboxHeld) == 0 && len(b.OutboxResolved) == 0 {
		return keys, args, nil
	}
	if err := engine.CheckOutbox(b); err != nil {
		return nil, nil, fmt.Errorf("redis store: %w", err)
	}
	keys = append(keys, s.k.outbox(s.member), s.k.outboxIDs(s.member))
	args = append(args, len(b.Outbox), len(b.OutboxHeld), len(b.OutboxResolved))
	for i := range b.Outbox {
		j, err := json.Marshal(&b.Outbox[i])
		if err != nil {
			return nil, nil, fmt.Errorf("redis store: encode outbox entry %d: %w", b.Outbox[i].ID, err)
		}
		args = append(args, quarantineID(b.Outbox[i].ID), j)
	}
	for _, h := range b.OutboxHeld {
		keys = append(keys, s.k.outbox(h.Member), s.k.outboxIDs(h.Member), s.k.outboxHeld(h.Member))
		pending := "0"
		if h.Pending {
			pending = "1"
		}
		args = append(args, quarantineID(h.ID), h.Reason, pending)
	}
	for _, r := range b.OutboxResolved {
		keys = append(keys, s.k.outbox(r.Member), s.k.outboxIDs(r.Member), s.k.outboxHeld(r.Member))
		requeue := "0"
		if r.Requeue {
			requeue = "1"
		}
		args = append(args, quarantineID(r.ID), requeue)
	}
	return keys, args, nil
}

// outboxListScript reads a page of an outbox in one step, so that no entry
// listed is missing its value.
//
// KEYS[1] the outbox ids, [2] the outbox. ARGV[1] the lexical minimum
// ("(" and the hex id listed last, or "-"), [2] the most entries.
//
// Returns the entries' JSON values in id order.
var outboxListScript = goredis.NewScript(`
local ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))
`)

// Outbox returns up to limit of member's pending entries with ID > after,
// in ID order.
func (s *Store) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("redis store: outbox limit %d is below 1", limit)
	}
	vals, err := outboxListScript.Run(ctx, s.c, []string{s.k.outboxIDs(member), s.k.outbox(member)},
		"("+quarantineID(after), limit).Slice()
	if err != nil {
		return nil, s.fail("read the outbox of "+member, err)
	}
	out := make([]engine.OutboxEntry, 0, len(vals))
	for _, v := range vals {
		v, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("redis store: the outbox of %q lists an entry it does not hold", member)
		}
		var e engine.OutboxEntry
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			return nil, fmt.Errorf("redis store: decode an outbox entry of %q: %w", member, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// OutboxDone removes delivered entries of member's outbox in one
// transaction; IDs no longer pending are ignored.
func (s *Store) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	if err := s.writer("outbox done"); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	hex := make([]string, len(ids))
	for i, id := range ids {
		hex[i] = quarantineID(id)
	}
	_, err := s.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HDel(ctx, s.k.outbox(member), hex...)
		p.ZRem(ctx, s.k.outboxIDs(member), hex)
		return nil
	})
	if err != nil {
		return s.fail("mark outbox entries of "+member+" done", err)
	}
	return nil
}

// OutboxDepth counts member's pending entries.
func (s *Store) OutboxDepth(ctx context.Context, member string) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	n, err := s.c.ZCard(ctx, s.k.outboxIDs(member)).Result()
	if err != nil {
		return 0, s.fail("count the outbox of "+member, err)
	}
	return int(n), nil
}

// OutboxHeld returns every member's held entries, by member then ID.
func (s *Store) OutboxHeld(ctx context.Context) ([]engine.HeldEntry, error) {
	members, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	var out []engine.HeldEntry
	for _, m := range members {
		kv, err := s.c.HGetAll(ctx, s.k.outboxHeld(m)).Result()
		if err != nil {
			return nil, s.fail("read the held outbox entries of "+m, err)
		}
		var hs []engine.HeldEntry
		for id, v := range kv {
			h, err := decodeHeld(m, v)
			if err != nil {
				return nil, fmt.Errorf("redis store: held outbox entry %s of %q: %w", id, m, err)
			}
			hs = append(hs, h)
		}
		slices.SortFunc(hs, func(a, b engine.HeldEntry) int { return cmp.Compare(a.ID, b.ID) })
		out = append(out, hs...)
	}
	return out, nil
}

// decodeHeld decodes "<n>:" n bytes of reason, then the entry JSON.
func decodeHeld(member, v string) (engine.HeldEntry, error) {
	h := engine.HeldEntry{Member: member}
	n, rest, ok := strings.Cut(v, ":")
	size, err := strconv.Atoi(n)
	if !ok || err != nil || size < 0 || size > len(rest) {
		return h, fmt.Errorf("not \"<n>:<reason><entry>\"")
	}
	h.Reason = rest[:size]
	if err := json.Unmarshal([]byte(rest[size:]), &h.OutboxEntry); err != nil {
		return h, err
	}
	return h, nil
}

// members returns every member id the group ever gave a number, sorted.
func (s *Store) members(ctx context.Context) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ms, err := s.c.HKeys(ctx, s.k.members).Result()
	if err != nil {
		return nil, s.fail("read the members", err)
	}
	slices.Sort(ms)
	return ms, nil
}

// ClaimOutboxes takes or renews this handle's outbox claims for ClaimTTL;
// see engine.OutboxClaimer. A claim of this member's outbox held by a
// process on this host that has died is taken over at once, as the lease
// is.
func (s *Store) ClaimOutboxes(ctx context.Context) ([]string, error) {
	return s.claimEach(ctx, outboxClaims)
}

// ReleaseOutbox gives up this handle's claim of member's outbox.
func (s *Store) ReleaseOutbox(ctx context.Context, member string) error {
	return s.releaseClaim(ctx, outboxClaims, member)
}

// ClaimTTL is how long a claim holds without renewal: the lease TTL.
func (s *Store) ClaimTTL() time.Duration { return s.opts.LeaseTTL }
