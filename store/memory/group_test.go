package memory_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/store/storetest"
)

func TestGroupConformance(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) storetest.Opener {
		g := memory.NewGroup(0, 0)
		return func(member string) (engine.SharedStore, error) {
			m, err := g.Open(member)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { m.Close() })
			return m, nil
		}
	})
}
