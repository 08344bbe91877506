package sparkplug_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
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
	p := newFailoverPair(t, 200)
	g, m1, m2 := p.g, p.m1, p.m2
	send := func(e *engine.Engine, m sparkplug.Message) { t.Helper(); p.send(t, e, m) }
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
	applied := p.applied(t)
	if applied[15] != 0 {
		t.Errorf("placement 15, which no message took, applied %d times: seq 15 of placement 271, applied there by m2, applied again a ring below", applied[15])
	}
	for s := int64(271); s <= 280; s++ {
		if applied[s] != 1 {
			t.Errorf("placement %d applied %d times, want once", s, applied[s])
		}
	}
}
