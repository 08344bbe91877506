package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// pickyJournal refuses, as a full disk does, the next appends of the
// entries refuse picks.
type pickyJournal struct {
	*journal.Journal
	refuse func(engine.JournalEntry) bool // nil: none
	left   int                            // appends left to refuse
}

func (j *pickyJournal) Append(e engine.JournalEntry) error {
	if j.left > 0 && j.refuse != nil && j.refuse(e) {
		j.left--
		return errDiskFull
	}
	return j.Journal.Append(e)
}

// refuseNext has j refuse its next n batch entries.
func (j *pickyJournal) refuseNext(n int) {
	j.refuse = func(e engine.JournalEntry) bool { return e.Kind == engine.JournalBatch }
	j.left = n
}

// openPicky opens lg's member with a journal that refuses what it is told.
func (lg *lossGroup) openPicky() *pickyJournal {
	lg.t.Helper()
	var err error
	if lg.m, err = lg.g.Open("m1"); err != nil {
		lg.t.Fatal(err)
	}
	if lg.j, err = journal.Open(lg.jd, journal.Options{}); err != nil {
		lg.t.Fatal(err)
	}
	j := &pickyJournal{Journal: lg.j}
	if lg.e, err = engine.New(context.Background(), lg.m, engine.Options{Routes: []engine.Route{incidentRoute, meterRoute}, StoreName: "memory", Journal: j}); err != nil {
		lg.t.Fatal(err)
	}
	lg.t.Cleanup(lg.close)
	return j
}

// TestABatchTheJournalRefusedIsRecoveredWhenTheStoreLosesIt: a batch
// committed while the journal refused its entry is not acknowledged, and
// is handed its decisions when it is passed again; a store that fails over
// without it in between has lost it all the same. The member finds that
// out, from the entry it appends first, and decides it again on the
// promoted store: it is in the group's state once.
func TestABatchTheJournalRefusedIsRecoveredWhenTheStoreLosesIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		journal int // batches journaled after the failover's checkpoint, before the refused one
	}{
		{name: "the store checked before the batch is passed again", journal: 0},
		{name: "an earlier batch lost and recovered before the batch is passed again", journal: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
			j := lg.openPicky()
			if err := lg.feed(1, 5); err != nil {
				t.Fatal(err)
			}
			replica := lg.g.Checkpoint()
			if err := lg.feed(6, 5+tc.journal); err != nil {
				t.Fatal(err)
			}
			n := 6 + tc.journal
			batch := lossFeed(n)
			j.refuseNext(1)
			if _, err := lg.e.Process(ctx, batch); !errors.Is(err, errDiskFull) {
				t.Fatalf("Process = %v, want the journal's refusal", err)
			}
			lg.g.FailOver(replica)
			if err := lg.e.CheckStore(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := lg.e.Process(ctx, batch); err != nil {
				t.Fatal(err)
			}
			if err := lg.feed(n+1, 10); err != nil {
				t.Fatal(err)
			}
			lg.check(10)
		})
	}
}

// TestARecoveredBatchTheJournalRefusedIsNotDecidedAgain: a batch a
// recovery decided again, whose entry the journal refused, is committed:
// the recovery, retried, does not decide its lost batch once more.
func TestARecoveredBatchTheJournalRefusedIsNotDecidedAgain(t *testing.T) {
	ctx := context.Background()
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	j := lg.openPicky()
	lg.resumeFeed(1, 5)
	replica := lg.g.Checkpoint()
	lg.resumeFeed(6, 12)
	lg.g.FailOver(replica)
	redone := 0
	j.refuse = func(e engine.JournalEntry) bool {
		if e.Redecides.Position == 0 {
			return false
		}
		redone++
		return redone == 3 // the third lost batch decided again
	}
	j.left = 1
	if err := lg.e.CheckStore(ctx); !errors.Is(err, engine.ErrStoreBehind) {
		t.Fatalf("CheckStore = %v, want the recovery stopped by the journal", err)
	}
	if err := lg.e.CheckStore(ctx); err != nil {
		t.Fatal(err)
	}
	lg.resumeFeed(13, 15)
	lg.checkDecidedOnce(15)
}

// TestASplitBatchWhosePartTheJournalRefusedIsNotDecidedTwice: a batch
// committed in two parts (rows another member held) whose first or second
// part's journal entry is refused keeps, passed again, every decision
// committed, and decides only what no part committed.
func TestASplitBatchWhosePartTheJournalRefusedIsNotDecidedTwice(t *testing.T) {
	for _, refused := range []int{1, 2} {
		t.Run(fmt.Sprintf("part %d refused", refused), func(t *testing.T) {
			ctx := context.Background()
			m, _ := memory.NewGroup(0, 0).Open("m1")
			held := engine.SourceState{Route: "incidents", Source: []string{"fd", "e1"}}
			st := &holding{sharedBackend: m, holds: []engine.HeldRows{{Sources: []string{held.ID()}}}}
			jd, err := journal.Open(t.TempDir(), journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer jd.Close()
			j := &pickyJournal{Journal: jd}
			n := 0
			j.refuse = func(e engine.JournalEntry) bool { n++; return n == refused }
			j.left = 1
			counts := recordCounts{}
			e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}, Observer: counts, Journal: j})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			batch := []engine.Message{unitUpdate("e1", 1, "7", 1), unitUpdate("e2", 1, "8", 2), unitUpdate("e3", 1, "9", 3)}
			if _, err := e.Process(ctx, batch); !errors.Is(err, errDiskFull) {
				t.Fatalf("Process = %v, want the journal's refusal", err)
			}
			got, err := e.Process(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			want := []uint64{3, 1, 2}
			for i, d := range got {
				if d.Outcome != engine.Applied || d.Position != want[i] {
					t.Errorf("delivery %d: %s at position %d, want applied at %d", i, d.Outcome, d.Position, want[i])
				}
			}
			if counts["applied"] != 3 || len(counts) != 1 {
				t.Errorf("decisions observed %v, want 3 applied", counts)
			}
			var heads []uint64
			if _, err := jd.Replay(engine.AuditHead{}, func(je engine.JournalEntry) error { heads = append(heads, je.Head.Position); return nil }); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(heads) != "[2 3]" {
				t.Fatalf("journal heads %v, want [2 3]", heads)
			}
		})
	}
}
