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
	h := p.handle(t, "m2") // two minutes later, by its wall clock and its server's
	h.Store = clockAhead(h.Store, 2*time.Minute)
	later := newEngine(t, h, func() time.Time { return t0.Add(2 * time.Minute) })
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

// clockAhead returns s, whose server's clock, if it reads one
// (Capabilities.Clock), reads by ahead of the server's: the group's key
// clock as it reads that much later.
func clockAhead(s engine.Store, by time.Duration) engine.Store {
	c := s.Capabilities().Clock
	if c == nil {
		return s
	}
	return serverAhead{Store: s, clock: c, by: by}
}

type serverAhead struct {
	engine.Store
	clock engine.ServerClock
	by    time.Duration
}

func (s serverAhead) Capabilities() engine.Capabilities {
	c := s.Store.Capabilities()
	c.Clock = s
	return c
}

func (s serverAhead) ServerTime() (engine.ServerReading, bool) {
	r, ok := s.clock.ServerTime()
	r.Server = r.Server.Add(s.by)
	return r, ok
}
