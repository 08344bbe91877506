package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// journaledMember is member name of g with a journal of its own, of the
// given retention, and an engine on it deciding the meters route with a
// key window of an hour and clock as its time; all closed at cleanup.
func journaledMember(t *testing.T, g *memory.Group, name string, retention time.Duration, clock func() time.Time) (engine.Store, *engine.Engine) {
	t.Helper()
	m, err := g.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	j, err := journal.Open(t.TempDir(), journal.Options{Retention: retention, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	e, err := engine.New(context.Background(), m, engine.Options{Routes: []engine.Route{meterRoute}, StoreName: "memory", Journal: j, TTL: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return m, e
}

// TestARecoveryHoldsAMessageHeldAlreadyUnderNoSecondEntry: the store lost
// the group's decisions of one reading, applied by m1 and found duplicate
// twice by m2 and once by m3. Decided again from the journals, each
// duplicate is held (its first copy's decision is gone), but under one
// quarantine entry: the second copy, of m2's own recovery or of m3's, is a
// duplicate of the open entry, as any delivery of a held message is, and
// each recovery completes. Two entries of one message would apply it
// twice once both were released.
func TestARecoveryHoldsAMessageHeldAlreadyUnderNoSecondEntry(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	g := memory.NewGroup(0, 0)
	m1, e1 := journaledMember(t, g, "m1", time.Hour, clock)
	_, e2 := journaledMember(t, g, "m2", time.Hour, clock)
	_, e3 := journaledMember(t, g, "m3", time.Hour, clock)
	replica := g.Checkpoint() // before any of it
	reading := []engine.Message{{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":0.25}`)}}
	for i, step := range []struct {
		e    *engine.Engine
		want engine.Outcome
	}{{e1, engine.Applied}, {e2, engine.Duplicate}, {e2, engine.Duplicate}, {e3, engine.Duplicate}} {
		if out, err := step.e.Process(ctx, reading); err != nil || out[0].Outcome != step.want {
			t.Fatalf("delivery %d: %v, %v; want %s", i+1, out, err, step.want)
		}
	}
	g.FailOver(replica)
	now = now.Add(time.Minute)
	for _, e := range []*engine.Engine{e2, e3, e1} {
		if err := e.CheckStore(ctx); err != nil {
			t.Fatalf("member %s's recovery: %v", e.Member(), err)
		}
	}
	open := 0
	m1.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
		if string(q.Payload) == `{"msgId":"r-1","kwh":0.25}` {
			open++
		}
		return nil
	})
	if open != 1 {
		t.Fatalf("%d quarantine entries of reading r-1 after the recoveries, want 1", open)
	}
	st, err := e1.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == "meter/m1" && s.Fields.Get("kwh").Num != "0.25" {
			t.Fatalf("meter/m1 kwh = %s after the recoveries, want 0.25", s.Fields.Get("kwh").Num)
		}
	}
}
