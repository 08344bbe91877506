package redis

import (
	"context"
	"fmt"
	"maps"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.RouteRecorder = (*Store)(nil)

// recordRoutesScript records each route's key derivation unless the group
// holds one: KEYS[1] the routes hash; ARGV pairs of route name and
// derivation. Returns the derivation held for each name, in ARGV's order.
var recordRoutesScript = goredis.NewScript(`
local held = {}
for i = 1, #ARGV, 2 do
	redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
	held[#held + 1] = redis.call('HGET', KEYS[1], ARGV[i])
end
return held
`)

// RecordRoutes records the key derivation of each route of want that the
// group has none for, and returns the one the group holds for each route
// of want, in one script: two members recording one route at once record
// it once.
func (s *Store) RecordRoutes(ctx context.Context, want map[string][]byte) (map[string][]byte, error) {
	if err := s.writer("record routes"); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(want))
	args := make([]any, 0, 2*len(names))
	for _, n := range names {
		args = append(args, n, want[n])
	}
	held, err := recordRoutesScript.Run(ctx, s.c, []string{s.k.routes}, args...).StringSlice()
	if err != nil {
		return nil, s.fail("record the routes' key derivations", err)
	}
	if len(held) != len(names) {
		return nil, fmt.Errorf("redis store: record the routes' key derivations: %d answers for %d routes", len(held), len(names))
	}
	got := make(map[string][]byte, len(names))
	for i, n := range names {
		got[n] = []byte(held[i])
	}
	return got, nil
}

var _ engine.RouteRecords = (*Store)(nil)

// RecordedRoutes returns the key derivation the group records for each of
// names that has one, reading only: also on a store opened without a
// member.
func (s *Store) RecordedRoutes(ctx context.Context, names []string) (map[string][]byte, error) {
	got := make(map[string][]byte, len(names))
	if len(names) == 0 {
		return got, nil
	}
	held, err := s.c.HMGet(ctx, s.k.routes, names...).Result()
	if err != nil {
		return nil, s.fail("read the routes' key derivations", err)
	}
	for i, v := range held {
		if d, ok := v.(string); ok {
			got[names[i]] = []byte(d)
		}
	}
	return got, nil
}
