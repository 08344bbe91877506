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

// TestASplitBatchWhosePartTheStoreLostIsDecidedAgain: a batch commits the
// part whose rows no other member holds, then the store fails over to a
// copy without that part, and the part after fails. The batch was never
// acknowledged: its deliveries are all still in hand. Without a journal,
// once an operator accepts the loss, the batch passed again must decide
// every delivery whose decision the store lost, not hand over decisions
// the store no longer holds (their effects would be lost for good, and the
// broker told they were decided). With a journal, the member decides the
// lost part again from it, and the batch passed again keeps those
// decisions: each delivery is applied once either way. The same where the
// store failed over to holds another chain for the member (a fork), which
// an operator accepts.
func TestASplitBatchWhosePartTheStoreLostIsDecidedAgain(t *testing.T) {
	for _, c := range []struct {
		journal, fork bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("journal %v fork %v", c.journal, c.fork), func(t *testing.T) {
			ctx := context.Background()
			g := memory.NewGroup(0, 0)
			m, err := g.Open("m1")
			if err != nil {
				t.Fatal(err)
			}
			held := engine.SourceState{Route: "incidents", Source: []string{"fd", "e1"}}
			st := &holding{sharedBackend: m, holds: []engine.HeldRows{{Sources: []string{held.ID()}}}, failAt: 2}
			opts := engine.Options{Routes: []engine.Route{incidentRoute}, StoreName: "memory"}
			if c.journal {
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
			g.FailOver(replica) // the store the member fails over to lacks the first part
			switch {
			case c.fork:
				forkChain(t, m, "m1")
				if _, err := e.Process(ctx, batch); !errors.Is(err, engine.ErrStoreBehind) && e.Loss() == nil {
					t.Fatalf("Process after the fork = %v, want the loss", err)
				}
				if l := e.Loss(); l == nil || !l.Forked {
					t.Fatalf("loss %+v, want a fork", l)
				}
				if _, err := e.AcceptLoss(ctx, "duty officer"); err != nil {
					t.Fatal(err)
				}
			case !c.journal:
				if _, err := e.Process(ctx, batch); !errors.Is(err, engine.ErrStoreBehind) {
					t.Fatalf("Process after the failover = %v, want ErrStoreBehind", err)
				}
				if _, err := e.AcceptLoss(ctx, "duty officer"); err != nil {
					t.Fatal(err)
				}
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

// forkChain commits another chain of three records for member on s: a
// fork at and past the member's head.
func forkChain(t *testing.T, s engine.Store, member string) {
	t.Helper()
	commitAfter(t, s, member, engine.AuditHead{}, 3)
}

// commitAfter commits n records for member on s after head, as something
// other than the member would.
func commitAfter(t *testing.T, s engine.Store, member string, head engine.AuditHead, n int) {
	t.Helper()
	var recs []engine.AuditRecord
	prev := head.Hash
	for pos := head.Position + 1; pos <= head.Position+uint64(n); pos++ {
		r := engine.AuditRecord{Position: pos, Time: time.Unix(1_700_000_000, int64(pos)).UTC(), Route: "x", Topic: "x",
			Outcome: "malformed", Member: member}
		if err := engine.Seal(&r, prev); err != nil {
			t.Fatal(err)
		}
		prev = r.Hash
		recs = append(recs, r)
	}
	if err := s.Commit(context.Background(), &engine.Batch{Audit: recs}); err != nil {
		t.Fatal(err)
	}
}
