package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// lockTable refuses, as PostgreSQL's server does when it cannot hold a
// batch's locks, every Update reading more than one source; after its
// first successful Update it runs stepped (the wall clock steps back).
type lockTable struct {
	sharedBackend
	stepped func()
	done    bool
}

func (l *lockTable) Capabilities() engine.Capabilities {
	c := l.sharedBackend.Capabilities()
	c.Shared = l
	return c
}

func (l *lockTable) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if len(r.Sources) > 1 {
		return engine.ErrLockTable
	}
	err := l.sharedBackend.Update(ctx, r, decide)
	if err == nil && !l.done {
		l.done = true
		l.stepped()
	}
	return err
}

// A batch the store's server could not lock at once is decided in halves,
// each timed when its rows are read: the second no earlier than the first,
// even when the wall clock steps back between them (a member's chain,
// merged by time with the others', never shows a later record before an
// earlier one). It was floored at the batch's start.
func TestTheHalvesOfABatchAreTimedInOrder(t *testing.T) {
	ctx := context.Background()
	base := time.Unix(1_900_000_000, 0)
	var off atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(off.Add(int64(time.Second)))) }
	m, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	st := &lockTable{sharedBackend: m, stepped: func() { off.Add(-int64(30 * time.Second)) }}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ds, err := e.Process(ctx, []engine.Message{unitUpdate("e1", 1, "7", 1), unitUpdate("e2", 1, "8", 1)})
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	if err := m.ScanChain(ctx, "m1", 1, func(r engine.AuditRecord) error { times = append(times, r.Time); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(times) != 2 || ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Applied {
		t.Fatalf("outcomes %s %s, records timed %v: want both applied, one record each", ds[0].Outcome, ds[1].Outcome, times)
	}
	for i := 1; i < len(times); i++ {
		if times[i].Before(times[i-1]) {
			t.Fatalf("record %d timed %v, before record %d (%v) of the same batch", i+1, times[i], i, times[i-1])
		}
	}
}
