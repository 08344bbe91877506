package mqtt

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho/session"
)

// fakeSession stands in for paho's session state: it records the QoS 2
// acknowledgements the gate passes on.
type fakeSession struct {
	session.SessionManager
	acked []uint16
}

func (s *fakeSession) ConAckReceived(io.Writer, *packets.Connect, *packets.Connack) error { return nil }
func (s *fakeSession) ConnectionLost(*packets.Disconnect) error                           { return nil }
func (s *fakeSession) Ack(pb *packets.Publish) error {
	s.acked = append(s.acked, pb.PacketID)
	return nil
}

// wire records each write and the PUBACK packet ids it carried.
type wire struct {
	writes int
	ids    []uint16
	fail   bool
}

// lockedWire is a wire that paho serialises its writes on, like its TLS
// and WebSocket connections.
type lockedWire struct {
	wire
	locked bool
}

func (w *lockedWire) Lock()   { w.locked = true }
func (w *lockedWire) Unlock() { w.locked = false }
func (w *lockedWire) Write(p []byte) (int, error) {
	if !w.locked {
		return 0, errors.New("written without the connection's lock")
	}
	return w.wire.Write(p)
}

func (w *wire) Write(p []byte) (int, error) {
	if w.fail {
		return 0, errors.New("broken pipe")
	}
	w.writes++
	r := bytes.NewReader(p)
	for r.Len() > 0 {
		cp, err := packets.ReadPacket(r)
		if err != nil {
			return 0, err
		}
		w.ids = append(w.ids, cp.Content.(*packets.Puback).PacketID)
	}
	return len(p), nil
}

func publishes(qos byte, ids ...uint16) []*packets.Publish {
	var ps []*packets.Publish
	for _, id := range ids {
		ps = append(ps, &packets.Publish{QoS: qos, PacketID: id})
	}
	return ps
}

func gensOf(n int, gen uint64) []uint64 {
	gens := make([]uint64, n)
	for i := range gens {
		gens[i] = gen
	}
	return gens
}

func TestAckGate(t *testing.T) {
	connect := func(g *ackGate, w io.Writer) uint64 {
		if err := g.ConAckReceived(w, &packets.Connect{}, &packets.Connack{}); err != nil {
			t.Fatal(err)
		}
		return g.generation()
	}

	t.Run("a broker's DISCONNECT reason is heard before the connection is down", func(t *testing.T) {
		g, w := newAckGate(&fakeSession{}), &wire{}
		var heard []byte
		g.onDisconnect = func(reason byte) { heard = append(heard, reason) }
		gen := connect(g, w)
		if err := g.ConnectionLost(&packets.Disconnect{ReasonCode: sessionTakenOver}); err != nil {
			t.Fatal(err)
		}
		if err := g.ConnectionLost(nil); err != nil { // paho's shutdown, after it
			t.Fatal(err)
		}
		if !slices.Equal(heard, []byte{sessionTakenOver}) || g.live(gen) {
			t.Fatalf("heard %x, generation live %v; want 8e once and the generation ended", heard, g.live(gen))
		}
	})

	t.Run("paho's own acknowledgement sends nothing", func(t *testing.T) {
		g, w := newAckGate(&fakeSession{}), &wire{}
		connect(g, w)
		if err := g.Ack(&packets.Publish{QoS: 1, PacketID: 1}); err != nil || w.writes != 0 {
			t.Fatalf("Ack: err %v, %d writes", err, w.writes)
		}
	})

	t.Run("a run of PUBACKs goes out in one write, in order", func(t *testing.T) {
		g, w := newAckGate(&fakeSession{}), &wire{}
		gen := connect(g, w)
		if sent := g.ack(publishes(1, 3, 1, 2), gensOf(3, gen)); sent != 3 {
			t.Fatalf("sent %d, want 3", sent)
		}
		if w.writes != 1 || !slices.Equal(w.ids, []uint16{3, 1, 2}) {
			t.Fatalf("%d writes of %v, want 1 of [3 1 2]", w.writes, w.ids)
		}
	})

	t.Run("nothing goes out once the connection is lost", func(t *testing.T) {
		g, w := newAckGate(&fakeSession{}), &wire{}
		gen := connect(g, w)
		if err := g.ConnectionLost(nil); err != nil {
			t.Fatal(err)
		}
		if g.live(gen) || g.ack(publishes(1, 1), gensOf(1, gen)) != 0 || w.writes != 0 {
			t.Fatalf("acknowledged on a lost connection: live %v, %d writes", g.live(gen), w.writes)
		}
	})

	t.Run("a delivery of an earlier connection is never acknowledged on the next", func(t *testing.T) {
		g, old, next := newAckGate(&fakeSession{}), &wire{}, &wire{}
		gen1 := connect(g, old)
		_ = g.ConnectionLost(nil)
		gen2 := connect(g, next)
		sent := g.ack(publishes(1, 7, 8), []uint64{gen1, gen2})
		if sent != 1 || old.writes != 0 || !slices.Equal(next.ids, []uint16{8}) {
			t.Fatalf("sent %d; old connection %v, new %v; want only 8 on the new one", sent, old.ids, next.ids)
		}
	})

	t.Run("QoS 2 goes through the session state, after the PUBACKs before it", func(t *testing.T) {
		s, w := &fakeSession{}, &wire{}
		g := newAckGate(s)
		gen := connect(g, w)
		pkts := append(publishes(1, 1), append(publishes(2, 2), publishes(0, 0)...)...)
		if sent := g.ack(pkts, gensOf(3, gen)); sent != 3 {
			t.Fatalf("sent %d, want 3", sent)
		}
		if !slices.Equal(w.ids, []uint16{1}) || !slices.Equal(s.acked, []uint16{2}) {
			t.Fatalf("PUBACKs %v, session acks %v; want [1] and [2]", w.ids, s.acked)
		}
	})

	t.Run("a connection that serialises writes is written under its lock", func(t *testing.T) {
		g, w := newAckGate(&fakeSession{}), &lockedWire{}
		gen := connect(g, w)
		if sent := g.ack(publishes(1, 1, 2), gensOf(2, gen)); sent != 2 || w.locked {
			t.Fatalf("sent %d, still locked %v; want 2, false", sent, w.locked)
		}
	})

	t.Run("a failed write counts nothing as sent", func(t *testing.T) {
		g := newAckGate(&fakeSession{})
		gen := connect(g, &wire{fail: true})
		if sent := g.ack(publishes(1, 1, 2), gensOf(2, gen)); sent != 0 {
			t.Fatalf("sent %d, want 0", sent)
		}
	})
}
