package sparkplug_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestDataStampedAfterTheHighestIsNotPlacedBelowIt: member b decides the
// first NDATA of a rebirth while member a still holds the NBIRTH, and the
// birth before has a gap at that NDATA's seq (its own message there is
// with a third member). Placed in the birth before, below its highest, the
// NDATA would fill that gap: applied there, it takes the key of the
// birth's own message, which then is a conflict that a release turns into
// a duplicate, never applied; and its redelivery after the NBIRTH is
// applied again. Stamped after the highest, it cannot be that birth's: it
// is held until its NBIRTH is decided, and every message applies once.
func TestDataStampedAfterTheHighestIsNotPlacedBelowIt(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		open := newGroup()
		a, b := newHarness(t, open("a")), newHarness(t, open("b"))
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		var late sparkplug.Message
		for i := range 30 { // seq 1 … 30; seq 10 is late
			m := edge.Data(c.next(), pulse())
			if i+1 == 10 {
				late = m
				continue
			}
			a.expect(engine.Applied, m)
		}
		rebirth := edge.Birth(c.next(), meterMetrics)
		var next []sparkplug.Message
		for range 10 { // seq 1 … 10 of the rebirth
			next = append(next, edge.Data(c.next(), pulse()))
		}
		d := b.send(next[9])
		t.Logf("seq 10 of the rebirth before its NBIRTH: %s (%s) in epoch %s at seq %d", d[0].Outcome, d[0].Reason, d[0].Epoch, d[0].Sequence)
		if d := b.send(late); d[0].Outcome != engine.AppliedLate {
			t.Errorf("the birth's own late seq 10: %s (%s), want applied_late", d[0].Outcome, d[0].Reason)
		}
		a.expect(engine.Applied, rebirth)
		b.expect(engine.Applied, next[:9]...)
		for _, h := range []*harness{a, b} { // redelivered to either member
			if d := h.send(next[9]); d[0].Outcome.Effective() != (h == a) {
				t.Errorf("seq 10 of the rebirth redelivered to member %s: %s (%s) in epoch %s at seq %d", h.store.(engine.SharedStore).Member(),
					d[0].Outcome, d[0].Reason, d[0].Epoch, d[0].Sequence)
			}
		}
		if got := a.field("meter/m1", "pulses"); got != "40" {
			t.Fatalf("pulses %s, want 40", got)
		}
	})
}

// TestMembersDecideOneEdgeAtOnce deals the feeds of four edges (a birth,
// data, a rebirth, data, a death, a new session and its data) to three
// members in chunks, each chunk to any member, every member deciding its
// chunks at once with the others; then the whole feed again (a failover's
// redelivery), then every held message is released by two members at
// once. Whatever the order the members commit in, no message is applied
// twice, none that was not applied was suppressed as a duplicate (each is
// held instead), and each edge's sum is exactly its applied messages'.
func TestMembersDecideOneEdgeAtOnce(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		open := newGroup()
		var hs []*harness
		for _, m := range []string{"a", "b", "c"} {
			hs = append(hs, newHarness(t, open(m)))
		}
		feed, index := raceFeed(4)
		rng := rand.New(rand.NewPCG(23, 5))
		var mu sync.Mutex
		applied, held := make([]int, len(feed)), make([]int, len(feed))
		tally := func(i int, d engine.Decision) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case d.Outcome.Effective():
				applied[i]++
			case d.Outcome.Held():
				held[i]++
			}
		}
		for range 2 { // the feed, then the broker's redelivery of all of it
			batches := make([][][]int, len(hs)) // each member's batches, in order
			for i := 0; i < len(feed); {
				n := min(1+rng.IntN(8), len(feed)-i)
				k := rng.IntN(len(hs))
				var b []int
				for j := i; j < i+n; j++ {
					b = append(b, j)
				}
				batches[k] = append(batches[k], b)
				i += n
			}
			together(len(hs), func(k int) {
				for _, b := range batches[k] {
					in := make([]engine.Message, len(b))
					for j, i := range b {
						in[j] = engine.Message{Topic: feed[i].Topic, Payload: feed[i].Payload}
					}
					out, err := hs[k].e.Process(context.Background(), in)
					if err != nil {
						t.Error(err)
						return
					}
					for j, i := range b {
						tally(i, out[j])
					}
				}
			})
		}
		var ids []uint64
		var idx []int
		if err := hs[0].store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
			ids, idx = append(ids, q.ID), append(idx, index[q.Topic+"\x00"+string(q.Payload)])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for j, id := range ids { // two operators release each held message at once
			together(2, func(k int) {
				d, err := hs[k].e.Release(t.Context(), id, "op")
				if err == nil {
					tally(idx[j], d)
				}
			})
		}
		sums := map[string]int{}
		for i, m := range feed {
			switch {
			case applied[i] > 1:
				t.Errorf("%s #%d: applied %d times", m.Topic, i, applied[i])
			case applied[i] == 0 && held[i] == 0:
				t.Errorf("%s #%d: never applied, and never held", m.Topic, i)
			case applied[i] == 1 && isData(m):
				sums["meter/"+edgeOf(m)]++
			}
		}
		for name, n := range sums {
			if got, want := hs[1].field(name, "pulses"), fmt.Sprint(n); got != want {
				t.Errorf("%s: pulses %s, want %s (the messages applied)", name, got, want)
			}
		}
		t.Logf("%d messages, %d held after the releases", len(feed), len(ids))
	})
}

// raceFeed is the feed of n edges, interleaved, and the index of each
// message by topic and payload.
func raceFeed(n int) ([]sparkplug.Message, map[string]int) {
	c := newClock()
	feeds := make([][]sparkplug.Message, n)
	for i := range feeds {
		e := sparkplug.NewEdge("plant", fmt.Sprintf("e%d", i), 0)
		f := []sparkplug.Message{e.Birth(c.next(), meterMetrics)}
		data := func(k int) {
			for range k {
				f = append(f, e.Data(c.next(), pulse()))
			}
		}
		data(120)
		f = append(f, e.Birth(c.next(), meterMetrics)) // a rebirth: epoch 0.1
		data(30)
		f = append(f, e.Death(c.next()))
		e.NewSession()
		f = append(f, e.Birth(c.next(), meterMetrics))
		data(30)
		feeds[i] = f
	}
	var out []sparkplug.Message
	index := map[string]int{}
	for j := range feeds[0] {
		for i := range feeds {
			index[feeds[i][j].Topic+"\x00"+string(feeds[i][j].Payload)] = len(out)
			out = append(out, feeds[i][j])
		}
	}
	return out, index
}

func isData(m sparkplug.Message) bool { return m.Topic[len("spBv1.0/plant/"):][:5] == "NDATA" }

func edgeOf(m sparkplug.Message) string { return m.Topic[len("spBv1.0/plant/NDATA/"):] }

// together runs fn(0) … fn(n-1) at once and waits for them.
func together(n int, fn func(k int)) {
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(k)
		}()
	}
	wg.Wait()
}
