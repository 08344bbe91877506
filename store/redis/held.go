package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

// heldPrefix is the part of an entry's member of quarantine:held that its
// key and content make: the hex of each, then ':'.
func heldPrefix(key, content engine.Hash) string {
	return hex.EncodeToString(key[:]) + hex.EncodeToString(content[:]) + ":"
}

// heldMember is q's member of quarantine:held; "" when q has no key or no
// content, and is not indexed.
func heldMember(q *engine.QuarantineEntry) string {
	if q.Key == "" || q.Content.IsZero() {
		return ""
	}
	k, err := engine.ParseHash(q.Key)
	if err != nil {
		return ""
	}
	return heldPrefix(k, q.Content) + quarantineID(q.ID)
}

// heldArgs appends the update script's last ARGV: each quarantine entry's
// member of the held index, then, for an Update (checked), the hex ids of
// the open entries the batch's duplicates name, their count, and "1" ("0"
// for Commit): an Update's entry of a message another open entry holds
// already is a lost race (heldFirst).
func heldArgs(args []any, b *engine.Batch, checked bool) []any {
	for i := range b.Quarantine {
		args = append(args, heldMember(&b.Quarantine[i]))
	}
	n := 0
	if checked {
		for _, id := range b.HeldOpen {
			args = append(args, quarantineID(id))
		}
		n = len(b.HeldOpen)
	}
	flag := "0"
	if checked {
		flag = "1"
	}
	return append(args, n, flag)
}

// FindHeld returns the lowest id of the open entries holding a message of
// key and content: the first member of quarantine:held after their prefix
// whose entry is still open. A member an entry left behind (resolved by a
// build from before the index, which knows nothing of it) is passed over:
// every member of the prefix is read, as the update script's check of a
// new entry (heldFirst) reads them, so that an open entry the check finds
// is one this finds too, and a batch decided again finds it.
// The batch that relies on the entry has the update script check that it
// is still open.
func (s *Store) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	prefix := heldPrefix(key, content)
	ms, err := s.c.ZRangeByLex(ctx, s.k.quarHeld, &goredis.ZRangeBy{Min: "[" + prefix, Max: "(" + prefix[:len(prefix)-1] + ";"}).Result()
	if err != nil {
		return 0, false, fmt.Errorf("redis store: find held entry: %w", err)
	}
	if len(ms) == 0 {
		return 0, false, nil
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = strings.TrimPrefix(m, prefix)
	}
	open := make([]*goredis.BoolCmd, len(ids)) // not HMGET: the entries' payloads are not read
	if _, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			open[i] = p.HExists(ctx, s.k.quarantine, id)
		}
		return nil
	}); err != nil {
		return 0, false, fmt.Errorf("redis store: find held entry: %w", err)
	}
	for i, c := range open {
		if !c.Val() {
			continue
		}
		id, err := strconv.ParseUint(ids[i], 16, 64)
		if err != nil {
			return 0, false, fmt.Errorf("redis store: held index member %q: %w", ms[i], err)
		}
		return id, true, nil
	}
	return 0, false, nil
}

// heldSince is the schema version from which every open entry of a
// message with a key is in the held index: a member of this build raising
// an older version indexes those it finds without a member (backfillHeld)
// before it raises the version, and a build from before, which writes
// entries the index does not hold, refuses the raised one.
const heldSince = 9

// backfillHeld indexes the open entries held before the index (by a build
// from before it) that have a key: each in id order, unless an open entry
// of its key and content is indexed already (backfillHeldScript). Members
// of this build opening at once may both run it: each entry is checked
// and indexed in one script, and each goes in id order, so the lowest id
// of a key and content without an index member is the one indexed.
func (s *Store) backfillHeld(ctx context.Context) error {
	from := "-"
	for {
		ids, err := s.c.ZRangeByLex(ctx, s.k.quarIDs, &goredis.ZRangeBy{Min: from, Max: "+", Count: scanChunk}).Result()
		if err != nil || len(ids) == 0 {
			return s.failed("index the entries held before the index", err)
		}
		if err := s.backfillHeldChunk(ctx, ids); err != nil {
			return s.failed("index the entries held before the index", err)
		}
		if len(ids) < scanChunk {
			return nil
		}
		from = "(" + ids[len(ids)-1]
	}
}

// failed is s.fail(op, err), or nil when err is.
func (s *Store) failed(op string, err error) error {
	if err == nil {
		return nil
	}
	return s.fail(op, err)
}

// backfillHeldChunk indexes the entries of ids that are open, have a key,
// and have no member of the index.
func (s *Store) backfillHeldChunk(ctx context.Context, ids []string) error {
	vals, err := s.c.HMGet(ctx, s.k.quarantine, ids...).Result()
	if err != nil {
		return err
	}
	by, err := s.c.HMGet(ctx, s.k.quarHeldBy, ids...).Result()
	if err != nil {
		return err
	}
	keys := []string{s.k.quarantine, s.k.quarHeld, s.k.quarHeldBy}
	for i, v := range vals {
		v, ok := v.(string)
		if !ok || by[i] != nil {
			continue // resolved since the ids were read, or indexed
		}
		q, err := decodeQuarantine(ids[i], v)
		if err != nil {
			// Left unindexed, as before the raise: the entry's own reads
			// report it, and the store still opens.
			continue
		}
		q.Content = engine.HeldContent(q.Topic, q.Payload)
		m := heldMember(&q)
		if m == "" {
			continue
		}
		if err := backfillHeldScript.Run(ctx, s.c, keys, ids[i], m).Err(); err != nil {
			return err
		}
	}
	return nil
}

// backfillHeldScript indexes one open entry under its member of the held
// index, unless it has one, is no longer open, or an open entry of its
// key and content is indexed already. KEYS[1] quarantine entries, [2]
// quarantine:held, [3] quarantine:heldby; ARGV[1] the entry's hex id, [2]
// its member. Returns 1 when it indexed the entry, 0 otherwise.
var backfillHeldScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 or redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
local pre = string.sub(ARGV[2], 1, 129)
for _, o in ipairs(redis.call('ZRANGEBYLEX', KEYS[2], '[' .. pre, '(' .. string.sub(pre, 1, 128) .. ';')) do
  if redis.call('HEXISTS', KEYS[1], string.sub(o, 130)) == 1 then return 0 end
end
redis.call('ZADD', KEYS[2], 0, ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
`)
