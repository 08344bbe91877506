package memory_test

import (
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance runs the conformance suite on a Store: single-owner,
// keeping nothing once closed.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Features{}, func(t *testing.T) storetest.Open {
		return func(string) (engine.Store, error) {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			return s, nil
		}
	})
}

func TestOutOfOrderKeysStaySorted(t *testing.T) {
	s := memory.New()
	defer s.Close()
	keys := func(ords ...uint64) []engine.KeyEntry {
		var out []engine.KeyEntry
		for _, o := range ords {
			out = append(out, engine.KeyEntry{Ordinal: o, Time: int64(o)})
		}
		return out
	}
	if err := s.Commit(t.Context(), &engine.Batch{Keys: keys(5, 6)}); err != nil {
		t.Fatal(err)
	}
	b := &engine.Batch{Keys: keys(3, 6, 7)}
	b.Keys[1].Time = 99
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, k := range snap.Keys {
		got = append(got, k.Ordinal)
	}
	if want := []uint64{3, 5, 6, 7}; !slices.Equal(got, want) || snap.Keys[2].Time != 99 {
		t.Errorf("keys %v (ordinal 6 time %d), want %v with the later entry for 6", got, snap.Keys[2].Time, want)
	}
}
