package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// TestARecoveryJudgesALostBatchsAgeByTheGroupsClock: a member whose wall
// clock steps by hours between a commit the store then loses and the
// recovery of that batch from the journal judges the batch's age by the
// group's clock, the store server's, by which its keys age, not by its
// wall clock. A batch a moment old by the server's clock is applied again
// after a step forward, not held as older than window.ttl; one older than
// window.ttl by the server's clock is held after a step back, not applied
// a second time although the replay another member applied meanwhile has
// left the key window.
func TestARecoveryJudgesALostBatchsAgeByTheGroupsClock(t *testing.T) {
	const ttl = 15 * time.Minute
	for _, tc := range []struct {
		name string
		step time.Duration // the member's wall clock, stepped after the commit
		// replayed: another member applies the lost delivery's replay
		// after the failover, and the server's clock then runs past
		// window.ttl before the recovery.
		replayed bool
		kwh      string // meter/m1's, after the recovery
		held     int    // quarantine entries of r-2
	}{
		{name: "a batch a moment old is applied again after the wall clock stepped forward", step: 2 * time.Hour, kwh: "0.5"},
		{name: "a batch older than window.ttl is held after the wall clock stepped back", step: -2 * time.Hour, replayed: true, kwh: "0.5", held: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g := memory.NewGroup(0, 0)
			var step atomic.Int64
			wall := func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
			open := func(id string, j engine.Journal) (*serverClocked, *engine.Engine) {
				m, err := g.Open(id)
				if err != nil {
					t.Fatal(err)
				}
				sc := &serverClocked{Member: m}
				sc.read(time.Now())
				opts := engine.Options{Routes: []engine.Route{meterRoute}, StoreName: "memory", TTL: ttl}
				if j != nil {
					opts.Journal, opts.Now = j, wall
				}
				e, err := engine.New(ctx, sc, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				return sc, e
			}
			j, err := journal.Open(t.TempDir(), journal.Options{Retention: ttl, Now: wall})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { j.Close() })
			m1, e1 := open("m1", j)
			m2, e2 := open("m2", nil)
			decide := func(e *engine.Engine, id string) engine.Outcome {
				t.Helper()
				ds, err := e.Process(ctx, []engine.Message{meter("m1", id, "0.25")})
				if err != nil {
					t.Fatal(err)
				}
				return ds[0].Outcome
			}
			if got := decide(e1, "r-1"); got != engine.Applied {
				t.Fatalf("r-1: %s", got)
			}
			replica := g.Checkpoint()
			if got := decide(e1, "r-2"); got != engine.Applied {
				t.Fatalf("r-2: %s", got)
			}
			g.FailOver(replica) // r-2, acknowledged to the broker, is lost
			if tc.replayed {
				if got := decide(e2, "r-2"); got != engine.Applied {
					t.Fatalf("the replay of r-2 on m2, after the failover: %s", got)
				}
				for _, m := range []*serverClocked{m1, m2} { // lease renewals after window.ttl has passed by the server's clock
					m.read(time.Now().Add(ttl + time.Minute))
				}
			}
			step.Store(int64(tc.step))
			if err := e1.CheckStore(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := e1.ReadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			kwh := ""
			for _, s := range st {
				if s.Name == "meter/m1" {
					kwh = s.Fields.Get("kwh").Num
				}
			}
			held := 0
			m1.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
				if strings.Contains(string(q.Payload), `"r-2"`) {
					held++
				}
				return nil
			})
			if kwh != tc.kwh || held != tc.held {
				t.Fatalf("after the recovery meter/m1 kwh = %s with %d quarantine entries of r-2; want %s with %d", kwh, held, tc.kwh, tc.held)
			}
		})
	}
}

// TestTheJournalsRetentionRunsByTheGroupsClock: a member's journal trims
// its entries by the clock a recovery judges their batches by, the
// group's, not by the member's wall clock. Each batch closes its segment
// here, as 64 MB segments close every few seconds at a high rate. After a
// step of the wall clock forward by hours, a batch a moment old is still
// in the journal when the store loses it, and is decided again, not left
// for an operator to accept as lost; after a step back, the entries from
// before the step, which by the wall clock look newer than every later
// one, still leave once the retention has passed by the group's clock,
// and so do those after them: the journal does not keep every entry for
// as long as the step.
func TestTheJournalsRetentionRunsByTheGroupsClock(t *testing.T) {
	const ttl = 15 * time.Minute
	type member struct {
		sc   *serverClocked
		e    *engine.Engine
		j    *journal.Journal
		g    *memory.Group
		step *atomic.Int64
	}
	open := func(t *testing.T) member {
		ctx := context.Background()
		mb := member{g: memory.NewGroup(0, 0), step: &atomic.Int64{}}
		wall := func() time.Time { return time.Now().Add(time.Duration(mb.step.Load())) }
		m, err := mb.g.Open("m1")
		if err != nil {
			t.Fatal(err)
		}
		mb.sc = &serverClocked{Member: m}
		mb.sc.read(time.Now())
		if mb.j, err = journal.Open(t.TempDir(), journal.Options{Retention: ttl, SegmentBytes: 1, Now: wall}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mb.j.Close() })
		mb.e, err = engine.New(ctx, mb.sc, engine.Options{Routes: []engine.Route{meterRoute}, StoreName: "memory", TTL: ttl, Journal: mb.j, Now: wall})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mb.e.Close() })
		return mb
	}
	decide := func(t *testing.T, e *engine.Engine, id string) {
		t.Helper()
		ds, err := e.Process(context.Background(), []engine.Message{meter("m1", id, "0.25")})
		if err != nil || ds[0].Outcome != engine.Applied {
			t.Fatalf("%s: %+v, %v; want applied", id, ds, err)
		}
	}

	t.Run("a batch a moment old is kept, and recovered, after the wall clock stepped forward", func(t *testing.T) {
		ctx := context.Background()
		mb := open(t)
		decide(t, mb.e, "r-1")
		replica := mb.g.Checkpoint()
		decide(t, mb.e, "r-2")
		mb.step.Store(int64(2 * time.Hour))
		decide(t, mb.e, "r-3")
		mb.g.FailOver(replica) // r-2 and r-3, acknowledged to the broker, are lost
		if err := mb.e.CheckStore(ctx); err != nil {
			t.Fatalf("CheckStore after the failover: %v", err)
		}
		st, err := mb.e.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Name == "meter/m1" && s.Fields.Get("kwh").Num != "0.75" {
				t.Fatalf("after the recovery meter/m1 kwh = %s, want 0.75: three readings, each applied once", s.Fields.Get("kwh").Num)
			}
		}
	})

	t.Run("entries leave once the retention has passed by the group's clock after the wall clock stepped back", func(t *testing.T) {
		mb := open(t)
		decide(t, mb.e, "r-1")
		mb.step.Store(int64(-2 * time.Hour))
		for i, id := range []string{"r-2", "r-3"} {
			// A little more than the retention passes, on every clock.
			passed := time.Duration(i+1) * (ttl + time.Minute)
			mb.step.Store(int64(-2*time.Hour + passed))
			mb.sc.read(time.Now().Add(passed)) // the lease renewal's reading
			decide(t, mb.e, id)
		}
		// r-1 is older than the retention by the group's clock when r-2 is
		// appended, and r-2 when r-3 is.
		uncovered, err := mb.j.Replay(engine.AuditHead{}, nil)
		if err != nil || uncovered != (engine.Span{From: 1, To: 2}) {
			t.Fatalf("the journal no longer holds positions %v (%v); want 1..2, older than the retention by the group's clock", uncovered, err)
		}
	})
}
