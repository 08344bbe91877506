package mqtt3

import (
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/replayguard/replayguard/engine"
)

// delivery is one PUBLISH in hand, with what its acknowledgement needs: the
// library's message, whose Ack writes the PUBACK (or PUBREC), and the
// generation of the connection that received it.
type delivery struct {
	msg engine.Message
	m   paho.Message
	gen uint64
	at  time.Time
	n   uint64 // its number among the consumer's deliveries (consume.Leaving)
}

// message is the engine message of the delivery: what its batch commits.
func (d *delivery) message() *engine.Message { return &d.msg }
