package storetest

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The case of a group's key pruning, as the engine sees it.

func testSharedExpiredKey(t *testing.T, p *place) {
	t0 := time.Now()
	a := newEngine(t, p.handle(t, "m1"), func() time.Time { return t0 })
	later := newEngine(t, p.handle(t, "m2"), func() time.Time { return t0.Add(2 * time.Minute) })
	if ds := mustProcess(t, a, meter(1, "1")); ds[0].Outcome != engine.Applied {
		t.Fatalf("first delivery: %v", ds[0].Outcome)
	}
	if ds := mustProcess(t, a, meter(1, "1")); ds[0].Outcome != engine.Duplicate {
		t.Fatalf("replay inside the ttl: %v", ds[0].Outcome)
	}
	if ds := mustProcess(t, later, meter(1, "1")); ds[0].Outcome != engine.Applied {
		t.Fatalf("a delivery after the key's ttl (1m) was %v: the expired key was not replaced", ds[0].Outcome)
	}
	if ds := mustProcess(t, later, meter(1, "1")); ds[0].Outcome != engine.Duplicate {
		t.Fatalf("its replay: %v", ds[0].Outcome)
	}
}
