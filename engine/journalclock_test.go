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
