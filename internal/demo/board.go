package demo

import (
	"strings"
	"sync"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/forward"
)

// Outcomes the dispatch board records in its tally, per copy it receives.
const (
	boardApplied = "applied" // the first copy of its key: applied to the picture
	boardRepeat  = "repeat"  // a key it had applied: skipped
	boardUnkeyed = "unkeyed" // no replayguard-key: nothing to key on, not applied
	boardInvalid = "invalid" // a key, but not a message of the story: not applied, the key not taken
)

// board is the dispatch centre's system downstream of replayguard: a
// dispatch board subscribed to the clean stream on the COP broker with a
// persistent MQTT 5 session, QoS 1, acknowledging every delivery at once
// like the naive console. Unlike that console it keys on the
// replayguard-key user property every forwarded copy carries: the first
// copy of a key is applied to its picture, any later one (the outbox
// delivers at least once: a copy whose PUBACK was lost is sent again) is
// counted and skipped. The keys it has applied live with its picture, here
// in memory, as a real board would keep them in the same transaction as
// its own state.
type board struct {
	sub   *subscriber
	tally *tally
	story *story

	mu     sync.Mutex
	app    applier
	pic    picture
	keys   map[string]bool
	sample *cleanCopy // the first copy, for the narration
}

// cleanCopy is what the narration shows of a forwarded copy.
type cleanCopy struct {
	topic string
	user  paho.UserProperties
}

func newBoard(cfg subscriberConfig, t *tally, s *story) *board {
	b := &board{tally: t, story: s, app: s.newApplier(), pic: picture{}, keys: map[string]bool{}}
	b.sub = &subscriber{cfg: cfg, tally: t, receive: b.receive}
	return b
}

// start connects (and keeps reconnecting) until stop.
func (b *board) start() error { return b.sub.start() }

// stop disconnects cleanly; the broker keeps the session.
func (b *board) stop() { b.sub.stop() }

// receive applies the first copy of each key; paho acknowledges every
// copy when this returns.
func (b *board) receive(pr paho.PublishReceived, broker string) {
	b.tally.received(1)
	key := ""
	if ps := pr.Packet.Properties; ps != nil {
		key = ps.User.Get(forward.HeaderKey)
	}
	id := b.story.idOf(pr.Packet.Payload)
	b.mu.Lock()
	if b.sample == nil {
		b.sample = &cleanCopy{topic: pr.Packet.Topic}
		if ps := pr.Packet.Properties; ps != nil {
			b.sample.user = append(paho.UserProperties(nil), ps.User...)
		}
	}
	outcome := boardApplied
	switch {
	case key == "":
		outcome = boardUnkeyed
	case b.keys[key]:
		outcome = boardRepeat
	case id == nil:
		outcome = boardInvalid
	default:
		b.keys[key] = true
		b.app.apply(b.pic, strings.TrimPrefix(pr.Packet.Topic, cleanPrefix), pr.Packet.Payload)
	}
	b.mu.Unlock()
	b.tally.handled(broker, id, pr.Packet.Duplicate(), outcome)
}

// picture returns a copy of the board's picture.
func (b *board) picture() picture {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pic.clone()
}

// first returns the first copy the board received, or nil.
func (b *board) first() *cleanCopy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sample
}
