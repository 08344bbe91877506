package redis

import (
	"testing"
	"time"

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

// TestSharedOutbox runs the outbox suite, a group per subtest.
func TestSharedOutbox(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	storetest.RunSharedOutbox(t, func(t *testing.T) storetest.OutboxGroup {
		g := newGroup(srv)
		return storetest.OutboxGroup{
			Open: func(member string) (engine.SharedStore, error) {
				s, err := g.open(t, member, func(o *Options) { o.LeaseTTL = time.Second })
				if err != nil {
					return nil, err
				}
				return s, nil
			},
			Kill: func(s engine.SharedStore) { kill(s.(*Store)) },
		}
	})
}

// kill ends s as kill -9 ends its process: the lease is no longer renewed
// and nothing is released, neither the lease nor the outbox claims.
func kill(s *Store) {
	s.closed.Store(true)
	s.stop()
	s.tasks.Wait()
	_ = s.c.Close()
}
