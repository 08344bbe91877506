package sparkplug_test

import (
	"math/rand/v2"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestEdgeSessionIsTheGroupsOnASharedStore deals two edges' feeds to two
// members of a consumer group in batches of random sizes, each batch to
// either member: a birth and the data that follows it in one batch, seq
// across the 255→0 wrap, a rebirth in the session, a death and a new
// session. Every message is applied once whichever member decides it,
// since the session each needs is the edge's row in the store, read in
// the same update as the keys it implies; and each batch sent again, with
// some of the messages before it, to either member, is all duplicate. The
// sums are exact.
func TestEdgeSessionIsTheGroupsOnASharedStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	open := memoryGroup(t)
	hs := []*harness{newHarness(t, open("m1")), newHarness(t, open("m2"))}
	feed, pulses := edgeFeed()
	send := func(msgs []sparkplug.Message, want engine.Outcome) {
		h := hs[rng.IntN(len(hs))]
		for j, d := range h.send(msgs...) {
			if d.Outcome != want {
				t.Fatalf("%s (%s): %s (%s), want %s", msgs[j].Topic, h.store.(*memory.Member).Member(), d.Outcome, d.Reason, want)
			}
		}
	}
	for i := 0; i < len(feed); {
		n := min(1+rng.IntN(40), len(feed)-i)
		send(feed[i:i+n], engine.Applied)
		send(feed[max(0, i-rng.IntN(40)):i+n], engine.Duplicate) // a replay to either member
		i += n
	}
	for _, h := range hs {
		for edge, want := range pulses {
			if got := h.field("meter/"+edge, "pulses"); got != want {
				t.Fatalf("%s: pulses %s, want %s", edge, got, want)
			}
		}
	}
	r := hs[0].source("m2")
	if r.Sparkplug == nil || !r.Sparkplug.Online || r.Sparkplug.BdSeq != 1 || r.Epoch != "1" || r.High != 10 {
		t.Fatalf("edge m2: %+v (session %+v), want online in session 1 at seq 10", r, r.Sparkplug)
	}
}

// edgeFeed is the feed of two edges, interleaved, and each edge's sum of
// pulses.
func edgeFeed() ([]sparkplug.Message, map[string]string) {
	c := newClock()
	var feeds [2][]sparkplug.Message
	for i, name := range []string{"m1", "m2"} {
		e := sparkplug.NewEdge("plant", name, 0)
		f := []sparkplug.Message{e.Birth(c.next(), meterMetrics)}
		for range 300 { // seq 1 … 255, 0 … 44
			f = append(f, e.Data(c.next(), pulse()))
		}
		f = append(f, e.Birth(c.next(), meterMetrics)) // a rebirth in session 0: epoch 0.1
		for range 20 {
			f = append(f, e.Data(c.next(), pulse()))
		}
		f = append(f, e.Death(c.next()))
		e.NewSession()
		f = append(f, e.Birth(c.next(), meterMetrics))
		for range 10 {
			f = append(f, e.Data(c.next(), pulse()))
		}
		feeds[i] = f
	}
	var out []sparkplug.Message
	for i := range feeds[0] {
		out = append(out, feeds[0][i], feeds[1][i])
	}
	return out, map[string]string{"m1": "330", "m2": "330"}
}
