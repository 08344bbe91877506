package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// serverClocked is a member of a memory group whose server's clock is
// read as a PostgreSQL or Redis store reads its server's: the test sets
// each reading, as a lease renewal would take it.
type serverClocked struct {
	*memory.Member
	mu sync.Mutex
	r  engine.ServerReading
}

func (s *serverClocked) Capabilities() engine.Capabilities {
	c := s.Member.Capabilities()
	c.Clock = s
	return c
}

func (s *serverClocked) ServerTime() (engine.ServerReading, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r, !s.r.Received.IsZero()
}

// read takes a reading of the server's clock, which reads server now.
func (s *serverClocked) read(server time.Time) {
	now := time.Now()
	s.mu.Lock()
	s.r = engine.ServerReading{Server: server, Sent: now, Received: now}
	s.mu.Unlock()
}

// On a store that reads its server's clock, the group's keys age by that
// clock: not by a member's wall clock stepped forward past window.ttl,
// and once window.ttl has passed by it, whatever the wall clocks say.
func TestAGroupsKeysAgeByTheStoreServersClock(t *testing.T) {
	const ttl = 30 * time.Minute
	ctx := context.Background()
	g := memory.NewGroup(ttl, 0)
	var members []*serverClocked
	var es []*engine.Engine
	for _, c := range []struct {
		id   string
		skew time.Duration
	}{{"right", 0}, {"stepped", 3 * time.Hour}} {
		m, err := g.Open(c.id)
		if err != nil {
			t.Fatal(err)
		}
		sc := &serverClocked{Member: m}
		opts := engine.Options{Routes: []engine.Route{meterRoute}, TTL: ttl, Now: func() time.Time { return time.Now().Add(c.skew) }}
		if _, err := engine.New(ctx, sc, opts); !errors.Is(err, engine.ErrNoServerClock) {
			t.Fatalf("a member whose store has not read its server's clock started: %v", err)
		}
		sc.read(time.Now())
		e, err := engine.New(ctx, sc, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		members, es = append(members, sc), append(es, e)
	}
	decide := func(i int, m engine.Message) engine.Outcome {
		t.Helper()
		ds, err := es[i].Process(ctx, []engine.Message{m})
		if err != nil {
			t.Fatal(err)
		}
		return ds[0].Outcome
	}
	reading := meter("m3", "meter-3-000042", "0.25")
	if got := decide(0, reading); got != engine.Applied {
		t.Fatalf("first copy: %s", got)
	}
	if got := decide(1, reading); got != engine.Duplicate {
		t.Fatalf("replay on the member whose wall clock runs 3h ahead: %s, want duplicate", got)
	}
	for _, m := range members { // the renewals after window.ttl has passed by the server's clock
		m.read(time.Now().Add(ttl + time.Minute))
	}
	if got := decide(1, reading); got != engine.Applied {
		t.Fatalf("replay once window.ttl has passed by the server's clock: %s, want applied", got)
	}
}
