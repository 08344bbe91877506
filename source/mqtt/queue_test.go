package mqtt

import (
	"slices"
	"testing"

	"github.com/eclipse/paho.golang/packets"

	"github.com/replayguard/replayguard/source/internal/consume"
)

func TestQueue(t *testing.T) {
	t.Run("the queue keeps the deliveries of dead connections", func(t *testing.T) {
		g := newAckGate(&fakeSession{})
		_ = g.ConAckReceived(&wire{}, &packets.Connect{}, &packets.Connack{})
		q := consume.NewQueue[delivery]()
		old := g.generation()
		for i := range 4 {
			q.Push(delivery{gate: g, gen: old, pkt: &packets.Publish{PacketID: uint16(i + 1)}})
		}
		q.Take(nil, 1)
		_ = g.ConnectionLost(nil)
		_ = g.ConAckReceived(&wire{}, &packets.Connect{}, &packets.Connack{})
		for i := range 2 {
			q.Push(delivery{gate: g, gen: g.generation(), pkt: &packets.Publish{PacketID: uint16(10 + i)}})
		}
		var got []uint16
		for _, d := range q.Take(nil, 10) {
			got = append(got, d.pkt.PacketID)
		}
		if want := []uint16{2, 3, 4, 10, 11}; !slices.Equal(got, want) {
			t.Fatalf("queue holds %v, want %v: a standby may not have the dead connection's deliveries", got, want)
		}
	})
}
