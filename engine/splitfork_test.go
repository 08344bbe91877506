package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// The split batch of TestASplitBatchWhosePartTheStoreLostIsDecidedAgain,
// but the store it fails over to holds another chain for the member (a
// fork): once an operator accepts it, the part committed before is
// decided again, and each delivery is applied once.
func TestASplitBatchWhosePartAForkTookIsDecidedAgain(t *testing.T) {
	for _, withJournal := range []bool{false, true} {
		t.Run(fmt.Sprintf("journal %v", withJournal), func(t *testing.T) {
			ctx := context.Background()
			g := memory.NewGroup(0, 0)
			m, err := g.Open("m1")
			if err != nil {
				t.Fatal(err)
			}
			held := engine.SourceState{Route: "incidents", Source: []string{"fd", "e1"}}
			st := &holding{sharedBackend: m, holds: []engine.HeldRows{{Sources: []string{held.ID()}}}, failAt: 2}
			opts := engine.Options{Routes: []engine.Route{incidentRoute}, StoreName: "memory"}
			if withJournal {
				j, err := journal.Open(t.TempDir(), journal.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer j.Close()
				opts.Journal = j
			}
			e, err := engine.New(ctx, st, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			replica := g.Checkpoint()
			batch := []engine.Message{unitUpdate("e1", 1, "7", 1), unitUpdate("e2", 1, "8", 2), unitUpdate("e3", 1, "9", 3)}
			if _, err := e.Process(ctx, batch); !errors.Is(err, errWrite) {
				t.Fatalf("Process = %v, want the second part's failure", err)
			}
			g.FailOver(replica)
			// Another chain for m1 on the promoted store: a fork at and past
			// the member's head.
			var recs []engine.AuditRecord
			var prev engine.Hash
			for pos := uint64(1); pos <= 3; pos++ {
				r := engine.AuditRecord{Position: pos, Time: time.Unix(1_700_000_000, int64(pos)).UTC(), Route: "x", Topic: "x",
					Outcome: "malformed", Member: "m1"}
				if err := engine.Seal(&r, prev); err != nil {
					t.Fatal(err)
				}
				prev = r.Hash
				recs = append(recs, r)
			}
			if err := m.Commit(ctx, &engine.Batch{Audit: recs}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Process(ctx, batch); !errors.Is(err, engine.ErrStoreBehind) && e.Loss() == nil {
				t.Fatalf("Process after the fork = %v, want the loss", err)
			}
			if l := e.Loss(); l == nil || !l.Forked {
				t.Fatalf("loss %+v, want a fork", l)
			}
			if _, err := e.AcceptLoss(ctx, "duty officer"); err != nil {
				t.Fatal(err)
			}
			got, err := e.Process(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range got {
				if d.Outcome != engine.Applied {
					t.Errorf("delivery %d: %s, want applied", i, d.Outcome)
				}
			}
			state, err := e.ReadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(entityValues(state)); s != "map[incident/7.casualties:1 incident/8.casualties:2 incident/9.casualties:3 unit/e1.status:s1 unit/e2.status:s1 unit/e3.status:s1]" {
				t.Fatalf("state %s: want each delivery of the batch applied once", s)
			}
		})
	}
}
