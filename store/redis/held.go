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
// build from before the index, which knows nothing of it) is passed over.
// The batch that relies on the entry has the update script check that it
// is still open.
func (s *Store) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	prefix := heldPrefix(key, content)
	ms, err := s.c.ZRangeByLex(ctx, s.k.quarHeld, &goredis.ZRangeBy{Min: "[" + prefix, Max: "(" + prefix[:len(prefix)-1] + ";", Count: heldLooks}).Result()
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

// heldLooks bounds the members of one key and content FindHeld reads.
const heldLooks = 8
