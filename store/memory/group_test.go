package memory_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/store/storetest"
)

// TestGroupConformance runs the conformance suite on a Group's member
// handles: the group outlives its handles, and a member can be killed.
func TestGroupConformance(t *testing.T) {
	features := storetest.Features{Members: true, Durable: true, Kill: func(s engine.Store) { s.(*memory.Member).Kill() }}
	storetest.Run(t, features, func(t *testing.T) storetest.Open {
		g := memory.NewGroup(0, 0)
		g.SetClaimTTL(300 * time.Millisecond)
		return func(member string) (engine.Store, error) {
			m, err := g.Open(member)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { m.Close() })
			return m, nil
		}
	})
}
