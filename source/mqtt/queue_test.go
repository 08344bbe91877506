package mqtt

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

func TestQueue(t *testing.T) {
	t.Run("deliveries come out in the order they went in, whatever the interleaving", func(t *testing.T) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 1))
		g := newAckGate(&fakeSession{})
		_ = g.ConAckReceived(&wire{}, &packets.Connect{}, &packets.Connack{})
		q := newQueue(64)
		var in, out uint16
		for range 20000 {
			if rng.IntN(3) > 0 { // pushes outrun takes: the queue grows
				in++
				if ok := q.push(delivery{gate: g, gen: g.generation(), pkt: &packets.Publish{PacketID: in}}); !ok {
					t.Fatalf("push %d refused", in)
				}
				continue
			}
			for _, d := range q.take(nil, 1+rng.IntN(40)) {
				out++
				if d.pkt.PacketID != out {
					t.Fatalf("took %d, want %d (seed %d)", d.pkt.PacketID, out, seed)
				}
			}
		}
		for _, d := range q.close() {
			out++
			if d.pkt.PacketID != out {
				t.Fatalf("left %d, want %d (seed %d)", d.pkt.PacketID, out, seed)
			}
		}
		if out != in {
			t.Fatalf("%d out of %d in", out, in)
		}
	})

	t.Run("past its bound the queue keeps the deliveries of dead connections", func(t *testing.T) {
		g := newAckGate(&fakeSession{})
		_ = g.ConAckReceived(&wire{}, &packets.Connect{}, &packets.Connack{})
		q := newQueue(4)
		old := g.generation()
		for i := range 4 {
			q.push(delivery{gate: g, gen: old, pkt: &packets.Publish{PacketID: uint16(i + 1)}})
		}
		q.take(nil, 1)
		_ = g.ConnectionLost(nil)
		_ = g.ConAckReceived(&wire{}, &packets.Connect{}, &packets.Connack{})
		for i := range 2 {
			q.push(delivery{gate: g, gen: g.generation(), pkt: &packets.Publish{PacketID: uint16(10 + i)}})
		}
		var got []uint16
		for _, d := range q.take(nil, 10) {
			got = append(got, d.pkt.PacketID)
		}
		if want := []uint16{2, 3, 4, 10, 11}; !slices.Equal(got, want) {
			t.Fatalf("queue holds %v, want %v: a standby may not have the dead connection's deliveries", got, want)
		}
	})
}
