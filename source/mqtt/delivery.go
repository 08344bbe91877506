package mqtt

import (
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/replayguard/replayguard/engine"
)

// delivery is one PUBLISH in hand, with what its acknowledgement needs: the
// packet and the generation of the connection that received it.
type delivery struct {
	msg  engine.Message
	gate *ackGate
	gen  uint64
	pkt  *packets.Publish
	at   time.Time
	n    uint64 // its number among the consumer's deliveries (consume.Leaving)
}

// message is the engine message of the delivery: what its batch commits.
func (d *delivery) message() *engine.Message { return &d.msg }

// dead reports whether the delivery's connection is gone. Its packet id
// then belongs to a session state the next connection may reuse for another
// message, so it must never be acknowledged.
func (d *delivery) dead() bool { return !d.gate.live(d.gen) }
