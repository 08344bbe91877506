package sparkplug_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestDataAnotherMemberAppliedAgainAfterAFailoverIsNotAppliedARingBelow:
// m1 applies an edge's NBIRTH and NDATA 1..280 (seq 15 never came: a gap
// in the window), the store fails over to a replica holding them up to
// 270, and m2, which receives the edge's messages too, decides 271 after
// the failover and applies it (the store no longer knows it), then 300
// or 420 more, so many keys that the key window (200) drops 271's. When
// m1 decides 271..280 again from its journal, 271's nearest placement
// behind the highest (527, less than half the ring behind 580, or half
// the ring or more behind 700) is m2's, and its own, 271, was seen by the
// window with its key gone: it may be that very message, applied there
// by m2. It is never applied a ring below, at the free placement 15, a
// second time.
func TestDataAnotherMemberAppliedAgainAfterAFailoverIsNotAppliedARingBelow(t *testing.T) {
	for _, after := range []int{300, 420} {
		t.Run(fmt.Sprintf("%d messages on", after), func(t *testing.T) { keyLeftAfterFailover(t, after) })
	}
}

func keyLeftAfterFailover(t *testing.T, after int) {
	ctx := context.Background()
	g := memory.NewGroup(keyTTL, 200)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clockNow := func() time.Time { return now }
	handles := map[string]*memory.Member{}
	member := func(id string, j engine.Journal) *engine.Engine {
		t.Helper()
		m, err := g.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{plantRoute}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}},
			Now: clockNow, StoreName: "memory", Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); m.Close() })
		handles[id] = m
		return e
	}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	m1, m2 := member("m1", j), member("m2", nil)
	send := func(e *engine.Engine, m sparkplug.Message) {
		t.Helper()
		now = now.Add(time.Second)
		out, err := e.Process(ctx, []engine.Message{{Topic: m.Topic, Payload: m.Payload}})
		if err != nil {
			t.Fatal(err)
		}
		if d := out[0]; d.Outcome != engine.Applied && d.Outcome != engine.AppliedLate {
			t.Fatalf("%s: %s (%s), want applied", m.Topic, d.Outcome, d.Reason)
		}
	}
	c := newClock()
	edge := sparkplug.NewEdge("plant", "e1", 0)
	send(m1, edge.Birth(c.next(), meterMetrics))
	for i := 1; i <= 270; i++ {
		m := edge.Data(c.next(), pulse())
		if i != 15 {
			send(m1, m)
		}
	}
	replica := g.Checkpoint()
	lost := edge.Data(c.next(), pulse()) // 271, seq 15
	send(m1, lost)
	for range 9 {
		send(m1, edge.Data(c.next(), pulse()))
	}
	g.FailOver(replica)
	send(m2, lost)
	for range after {
		send(m2, edge.Data(c.next(), pulse()))
	}
	if err := m1.CheckStore(ctx); err != nil {
		t.Fatalf("m1 did not recover what the store lost from its journal: %v", err)
	}
	applied := map[int64]int{}
	for _, id := range []string{"m1", "m2"} {
		err := handles[id].ScanChain(ctx, id, 0, func(r engine.AuditRecord) error {
			if r.Sequence != nil && r.Epoch == "0" && (r.Outcome == "applied" || r.Outcome == "applied_late") {
				applied[*r.Sequence]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if applied[15] != 0 {
		t.Errorf("placement 15, which no message took, applied %d times: seq 15 of placement 271, applied there by m2, applied again a ring below", applied[15])
	}
	for s := int64(271); s <= 280; s++ {
		if applied[s] != 1 {
			t.Errorf("placement %d applied %d times, want once", s, applied[s])
		}
	}
}
