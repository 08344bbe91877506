package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// countdown is a group member whose store lets through allow Updates
// (negative: all), then fails them.
type countdown struct {
	*groupMember
	allow atomic.Int64
}

func (f *countdown) Capabilities() engine.Capabilities {
	c := f.groupMember.Capabilities()
	c.Shared = f
	return c
}

func (f *countdown) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if n := f.allow.Load(); n >= 0 {
		if n == 0 {
			return errUnreachable
		}
		f.allow.Add(-1)
	}
	return f.groupMember.Update(ctx, r, decide)
}

func (lg *lossGroup) openCountdown() *countdown {
	lg.t.Helper()
	var err error
	if lg.m, err = lg.g.Open("m1"); err != nil {
		lg.t.Fatal(err)
	}
	f := &countdown{groupMember: lg.m}
	f.allow.Store(-1)
	if lg.j, err = journal.Open(lg.jd, journal.Options{}); err != nil {
		lg.t.Fatal(err)
	}
	if lg.e, err = engine.New(context.Background(), f, engine.Options{Routes: []engine.Route{incidentRoute, meterRoute}, StoreName: "memory", Journal: lg.j}); err != nil {
		lg.t.Fatal(err)
	}
	lg.t.Cleanup(lg.close)
	return f
}

// TestARecoveryMovedDownByASecondFailoverResumesFromItsNewStart: a second
// failover moves the recovery's start below the one its journal marker
// names. A member killed after the resumed recovery committed a few
// batches restarts from the marker: had it kept the old start, it would
// take the store's head (on the recovered chain) for it and decide nothing
// lost before it.
func TestARecoveryMovedDownByASecondFailoverResumesFromItsNewStart(t *testing.T) {
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	f := lg.openCountdown()
	if err := lg.feed(1, 10); err != nil {
		t.Fatal(err)
	}
	older := lg.g.Checkpoint()
	if err := lg.feed(11, 20); err != nil {
		t.Fatal(err)
	}
	newer := lg.g.Checkpoint()
	if err := lg.feed(21, 30); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(newer) // lost 21..30; the recovery cannot write yet
	f.allow.Store(0)
	if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
		t.Fatalf("CheckStore = %v, want the loss", err)
	}
	lg.g.FailOver(older) // a second failover: now 11..30 are lost
	f.allow.Store(3)     // the resumed recovery commits 3 batches, then the store fails again
	if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
		t.Fatalf("CheckStore = %v, want the recovery to fail part-way", err)
	}
	// The member is killed; the store is back.
	lg.close()
	lg.open(true)
	if l := lg.e.Loss(); l != nil {
		t.Fatalf("after restart: %v", l)
	}
	lg.check(30)
}

// TestARecoveryMovedDownByASecondFailoverEndsWithoutARestart: the same
// without the restart.
func TestARecoveryMovedDownByASecondFailoverEndsWithoutARestart(t *testing.T) {
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	f := lg.openCountdown()
	if err := lg.feed(1, 10); err != nil {
		t.Fatal(err)
	}
	older := lg.g.Checkpoint()
	if err := lg.feed(11, 20); err != nil {
		t.Fatal(err)
	}
	newer := lg.g.Checkpoint()
	if err := lg.feed(21, 30); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(newer)
	f.allow.Store(0)
	lg.e.CheckStore(context.Background())
	lg.g.FailOver(older)
	f.allow.Store(3)
	lg.e.CheckStore(context.Background())
	f.allow.Store(-1)
	if err := lg.e.CheckStore(context.Background()); err != nil {
		t.Fatal(err)
	}
	lg.check(30)
}

// TestAFailbackAfterAPartialRecoveryIsNoForkAtRestart: a recovery that
// wrote some batches to the promoted store before the store failed back to
// the old primary (which holds everything) leaves the journal's newest
// batch on the abandoned chain; its end names the store's head, which a
// restart (or any reload) compares the store with, and finds no fork.
func TestAFailbackAfterAPartialRecoveryIsNoForkAtRestart(t *testing.T) {
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	f := lg.openCountdown()
	if err := lg.feed(1, 10); err != nil {
		t.Fatal(err)
	}
	replica := lg.g.Checkpoint()
	if err := lg.feed(11, 20); err != nil {
		t.Fatal(err)
	}
	primary := lg.g.Checkpoint()
	lg.g.FailOver(replica)
	f.allow.Store(2) // the recovery writes two batches, then the store fails
	if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
		t.Fatalf("CheckStore = %v, want the loss", err)
	}
	lg.g.FailOver(primary) // failed back: the old primary holds every commit
	f.allow.Store(-1)
	if err := lg.e.CheckStore(context.Background()); err != nil {
		t.Fatal(err)
	}
	lg.check(20)
	lg.close() // restarted before its next batch
	lg.open(true)
	if l := lg.e.Loss(); l != nil {
		t.Fatalf("after restart on the store that holds everything: %v", l)
	}
	if err := lg.feed(21, 22); err != nil {
		t.Fatal(err)
	}
	lg.check(22)
}
