package demo

import (
	"encoding/json"
	"sync"

	"github.com/eclipse/paho.golang/paho"
)

// naive is the consumer most feeds have today: a persistent MQTT 5 session,
// QoS 1, every delivery applied to the picture and acknowledged at once by
// paho. It trusts the broker to deliver each report once.
type naive struct {
	sub   *subscriber
	tally *tally

	mu  sync.Mutex
	pic picture
}

func newNaive(cfg subscriberConfig, t *tally) *naive {
	n := &naive{tally: t, pic: picture{}}
	n.sub = &subscriber{cfg: cfg, tally: t, receive: n.receive}
	return n
}

// start connects (and keeps reconnecting) until stop.
func (n *naive) start() error { return n.sub.start() }

// stop disconnects cleanly; the broker keeps the session.
func (n *naive) stop() { n.sub.stop() }

// receive applies every delivery, whatever it is; paho acknowledges it when
// this returns.
func (n *naive) receive(pr paho.PublishReceived, broker string) {
	n.tally.received(1)
	var r report
	var id *msgID
	if err := json.Unmarshal(pr.Packet.Payload, &r); err == nil {
		n.mu.Lock()
		n.pic.apply(r)
		n.mu.Unlock()
		rid := r.id()
		id = &rid
	}
	n.tally.handled(broker, id, pr.Packet.Duplicate(), "")
}

// picture returns a copy of the naive consumer's picture.
func (n *naive) picture() picture {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pic.clone()
}
