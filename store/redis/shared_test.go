package redis

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/storetest"
)

// TestShared runs the shared stores' conformance suite, a group per
// subtest under a prefix of its own on one server.
func TestShared(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	storetest.RunShared(t, func(t *testing.T) storetest.Opener {
		g := newGroup(srv)
		return func(member string) (engine.SharedStore, error) {
			s, err := g.open(t, member)
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	})
}
