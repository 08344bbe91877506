package sparkplug_test

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// A rebirth's NBIRTH decided after the next session's NBIRTH (shared
// subscriptions deal them to different members, which commit in any
// order) is an older birth of the edge, not a replay: it is kept between
// the births before and after it, and its data is read with its table in
// its own epoch. Its first data, decided before it, was held (at or below
// the highest of the birth before) or applied in the birth before (above
// that highest). Released, what was held is applied once; redelivered,
// what was applied is its duplicate. Nothing stays held, and the sum is
// exact.
func TestARebirthDecidedAfterTheNextSessionIsKept(t *testing.T) {
	for _, n := range []int{120, 5} {
		t.Run(fmt.Sprintf("after %d data of the birth before", n), func(t *testing.T) {
			onEveryStore(t, func(t *testing.T, store engine.Store) { testARebirthDecidedLate(t, store, n) })
		})
	}
}

func testARebirthDecidedLate(t *testing.T, store engine.Store, n int) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	feed := []sparkplug.Message{edge.Birth(c.next(), meterMetrics)}
	data := func(k int) {
		for range k {
			feed = append(feed, edge.Data(c.next(), pulse()))
		}
	}
	data(n)                                                 // birth 0: feed[0 : n+1]
	feed = append(feed, edge.Birth(c.next(), meterMetrics)) // its rebirth, 0.1: feed[n+1]
	data(30)                                                // feed[n+2 : n+32]
	feed = append(feed, edge.Death(c.next()))
	edge.NewSession()
	next := len(feed)
	feed = append(feed, edge.Birth(c.next(), meterMetrics)) // session 1: feed[next:]
	data(30)

	index := map[string]int{}
	for i, m := range feed {
		index[m.Topic+"\x00"+string(m.Payload)] = i
	}
	applied := make([]int, len(feed))
	decide := func(msgs ...sparkplug.Message) []engine.Decision {
		out := h.send(msgs...)
		for i, d := range out {
			if d.Outcome.Effective() {
				applied[index[msgs[i].Topic+"\x00"+string(msgs[i].Payload)]]++
			}
		}
		return out
	}
	decide(feed[:n+1]...)
	decide(feed[next:]...)
	decide(feed[n+2 : n+12]...) // the rebirth's first data, before its NBIRTH
	if d := decide(feed[n+1]); !d[0].Outcome.Effective() || d[0].Epoch != "0.1" {
		t.Errorf("the rebirth after the next session's NBIRTH: %s (%s) in epoch %q, want applied in epoch 0.1", d[0].Outcome, d[0].Reason, d[0].Epoch)
	}
	decide(feed[n+12 : next]...) // the rest of the rebirth's data, the session's death
	release := func() {
		var ids []uint64
		var idx []int
		if err := h.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
			ids, idx = append(ids, q.ID), append(idx, index[q.Topic+"\x00"+string(q.Payload)])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for j, id := range ids {
			d, err := h.e.Release(t.Context(), id, "op")
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome.Effective() {
				applied[idx[j]]++
			}
		}
	}
	release()
	decide(feed...) // a failover redelivers all of it
	release()
	for i, k := range applied {
		if k != 1 {
			t.Errorf("%s #%d: applied %d times, want once", feed[i].Topic, i, k)
		}
	}
	if err := h.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		t.Errorf("still held after its release: %s (%s)", q.Topic, q.Reason)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := h.field("meter/m1", "pulses"), fmt.Sprint(n+30+30); got != want {
		t.Fatalf("pulses %s, want %s: each NDATA applied once", got, want)
	}
}
