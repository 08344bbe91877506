package redis

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/storetest"
)

// TestConformance runs the conformance suite, a group per case under a
// prefix of its own on one server.
func TestConformance(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	features := storetest.Features{Members: true, Durable: true,
		Kill: func(s engine.Store) { kill(s.(*Store)) }, Stall: func(s engine.Store) { stall(s.(*Store)) }}
	storetest.Run(t, features, func(t *testing.T) storetest.Open {
		g := newGroup(srv)
		return func(member string) (engine.Store, error) {
			// The claim cases wait for leases to expire.
			s, err := g.open(t, member, func(o *Options) { o.LeaseTTL = time.Second })
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	})
}

// stall stops s renewing its lease, as a process stalled past it stops;
// s is used as before.
func stall(s *Store) {
	s.stop()
	s.tasks.Wait()
}

// kill ends s as kill -9 ends its process: the lease is no longer renewed
// and nothing is released, neither the lease nor the outbox claims.
func kill(s *Store) {
	s.closed.Store(true)
	s.stop()
	s.tasks.Wait()
	_ = s.c.Close()
}
