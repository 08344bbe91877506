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

// TestAnEdgesDataAMemberAppliedIsAppliedAgainAfterAFailoverTheGroupWentOnFrom:
// member m1 applies an edge's NDATA seq 1..30; the store fails over to a
// replica that holds them up to seq 20; before m1 decides 21..30 again from
// its journal, member m2 applies the edge's NDATA that came after them, so
// that 21..30 are now more than half the ring behind the session's
// highest, or more than a whole ring (their nearest placements are m2's
// messages). m1 applied and acknowledged them: they are applied again
// (placed by their timestamps, as an operator's release is, where no
// message took the placement), never held, and the edge's pulses sum to
// every message's.
func TestAnEdgesDataAMemberAppliedIsAppliedAgainAfterAFailoverTheGroupWentOnFrom(t *testing.T) {
	for _, after := range []int{170, 300} {
		t.Run(fmt.Sprintf("%d messages on", after), func(t *testing.T) { edgeDataAfterFailover(t, after) })
	}
}

// TestAnEdgesDataAMemberAppliedIsAppliedAgainBelowWhatTheGroupTookARingAndAHalfOn:
// as above, but m2 applies 375 or 420 of the edge's NDATA before m1
// decides 21..30 again, so that their nearest placements behind the
// session's highest (405 or 450) are m2's messages a ring above theirs,
// half the ring or more behind the highest: 277 (seq 21 with the highest
// at 405, exactly half the ring), or 277..286 (with the highest at 450).
// They are placed at their own placements, 21..30, and applied there,
// never held as conflicts with m2's messages a ring above.
func TestAnEdgesDataAMemberAppliedIsAppliedAgainBelowWhatTheGroupTookARingAndAHalfOn(t *testing.T) {
	for _, after := range []int{375, 420} {
		t.Run(fmt.Sprintf("%d messages on", after), func(t *testing.T) { edgeDataAfterFailover(t, after) })
	}
}

func edgeDataAfterFailover(t *testing.T, after int) {
	ctx := context.Background()
	p := newFailoverPair(t, 10_000)
	g, m1, m2 := p.g, p.m1, p.m2
	send := func(e *engine.Engine, msgs ...sparkplug.Message) { t.Helper(); p.send(t, e, msgs...) }
	c := newClock()
	edge := sparkplug.NewEdge("plant", "e1", 0)
	send(m1, edge.Birth(c.next(), meterMetrics))
	for range 20 {
		send(m1, edge.Data(c.next(), pulse()))
	}
	replica := g.Checkpoint()
	for range 10 {
		send(m1, edge.Data(c.next(), pulse()))
	}
	g.FailOver(replica)
	for range after {
		send(m2, edge.Data(c.next(), pulse()))
	}
	if err := m1.CheckStore(ctx); err != nil {
		t.Fatalf("m1 did not recover what the store lost from its journal: %v", err)
	}
	err := p.handles["m1"].ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
		t.Errorf("held after the recovery: %s", q.Reason)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m1.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, s := range st {
		if s.Name == "meter/e1" {
			got = s.Fields.Get("pulses").Num
		}
	}
	if want := fmt.Sprint(30 + after); got != want {
		t.Errorf("meter/e1 pulses = %q after the recovery, want %s", got, want)
	}
	applied := p.applied(t)
	for s := int64(0); s <= int64(30+after); s++ {
		if applied[s] != 1 {
			t.Errorf("seq %d of the edge's session applied %d times, want once", s, applied[s])
		}
	}
	if len(applied) != 31+after {
		t.Errorf("the edge's session applied at %d placements, want %d (0 … %d)", len(applied), 31+after, 30+after)
	}
}

// failoverPair is a memory group of two members of the plant route, m1
// with a journal, on a clock that moves a second at each batch sent.
type failoverPair struct {
	g       *memory.Group
	m1, m2  *engine.Engine
	handles map[string]*memory.Member
	now     time.Time
}

// newFailoverPair opens the pair on a group whose key window holds
// maxKeys keys.
func newFailoverPair(t *testing.T, maxKeys int) *failoverPair {
	t.Helper()
	p := &failoverPair{g: memory.NewGroup(keyTTL, maxKeys), handles: map[string]*memory.Member{},
		now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	member := func(id string, j engine.Journal) *engine.Engine {
		m, err := p.g.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(context.Background(), m, engine.Options{Routes: []engine.Route{plantRoute}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}},
			Now: func() time.Time { return p.now }, StoreName: "memory", Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); m.Close() })
		p.handles[id] = m
		return e
	}
	p.m1, p.m2 = member("m1", j), member("m2", nil)
	return p
}

// send has e decide msgs in one batch, a second after the last batch, and
// fails the test unless each is applied.
func (p *failoverPair) send(t *testing.T, e *engine.Engine, msgs ...sparkplug.Message) {
	t.Helper()
	in := make([]engine.Message, len(msgs))
	for i, m := range msgs {
		in[i] = engine.Message{Topic: m.Topic, Payload: m.Payload}
	}
	p.now = p.now.Add(time.Second)
	out, err := e.Process(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range out {
		if d.Outcome != engine.Applied && d.Outcome != engine.AppliedLate {
			t.Fatalf("message %d (%s): %s (%s), want applied", i, msgs[i].Topic, d.Outcome, d.Reason)
		}
	}
}

// applied counts the messages of the edge's first session (its NBIRTH,
// seq 0, and its data) applied in the group, by placement.
func (p *failoverPair) applied(t *testing.T) map[int64]int {
	t.Helper()
	applied := map[int64]int{}
	for _, id := range []string{"m1", "m2"} {
		err := p.handles[id].ScanChain(context.Background(), id, 0, func(r engine.AuditRecord) error {
			if r.Sequence != nil && r.Epoch == "0" && (r.Outcome == "applied" || r.Outcome == "applied_late") {
				applied[*r.Sequence]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return applied
}
