package demo

import (
	"sync"

	"github.com/eclipse/paho.golang/paho"
)

// naive is the consumer most feeds have today: a persistent MQTT 5 session,
// QoS 1, every delivery applied to the picture and acknowledged at once by
// paho. It trusts the broker to deliver each message once.
type naive struct {
	sub   *subscriber
	tally *tally
	story *story

	mu  sync.Mutex
	app applier
	pic picture
}

func newNaive(cfg subscriberConfig, t *tally, s *story) *naive {
	n := &naive{tally: t, story: s, app: s.newApplier(), pic: picture{}}
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
	n.mu.Lock()
	n.app.apply(n.pic, pr.Packet.Topic, pr.Packet.Payload)
	n.mu.Unlock()
	n.tally.handled(broker, n.story.idOf(pr.Packet.Payload), pr.Packet.Duplicate(), "")
}

// picture returns a copy of the naive consumer's picture.
func (n *naive) picture() picture {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pic.clone()
}
