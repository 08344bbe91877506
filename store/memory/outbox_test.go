package memory_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/store/storetest"
)

func TestOutbox(t *testing.T) {
	storetest.RunOutbox(t, func(t *testing.T, _ string) engine.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, false)
}

func TestGroupOutbox(t *testing.T) {
	storetest.RunSharedOutbox(t, func(t *testing.T) storetest.OutboxGroup {
		g := memory.NewGroup(0, 0)
		g.SetClaimTTL(300 * time.Millisecond)
		return storetest.OutboxGroup{
			Open: func(member string) (engine.SharedStore, error) {
				m, err := g.Open(member)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { m.Close() })
				return m, nil
			},
			Kill: func(s engine.SharedStore) { s.(*memory.Member).Kill() },
		}
	})
}
