package demo

import (
	"sync"
	"time"
)

// tally is what the demo observes of one consumer: its connection, and
// every delivery it handled, by broker. It only watches: nothing in it
// feeds the consumer's decisions. Safe for concurrent use.
type tally struct {
	mu         sync.Mutex
	broker     string // connected broker URL; "" while down
	subscribed bool
	inHand     int // received, not yet handled (replayguard: committed) or abandoned
	last       time.Time
	seen       map[msgID]bool
	byBroker   map[string]*counts
	outcomes   map[string]int
	dupOutcome map[string]int // outcome -> deliveries with DUP=1
}

// counts are the deliveries of one broker to one consumer.
type counts struct {
	deliveries int
	dup        int // arrived with DUP=1
	replays    int // carried a message this consumer had handled before
	replayDup  int // replays with DUP=1
	firstDup   int // first deliveries with DUP=1
}

func newTally() *tally {
	return &tally{seen: map[msgID]bool{}, byBroker: map[string]*counts{}, outcomes: map[string]int{}, dupOutcome: map[string]int{}}
}

func (t *tally) connected(broker string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.broker = broker
}

func (t *tally) disconnected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.broker = ""
}

func (t *tally) setSubscribed(v bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subscribed = v
}

func (t *tally) received(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inHand += n
	t.last = time.Now()
}

// handled records one delivery handled: applied by the naive consumer,
// decided and committed by replayguard (outcome). The id is nil when the
// payload did not name a message of the story.
func (t *tally) handled(broker string, id *msgID, dup bool, outcome string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inHand-- // may briefly go below 0: a commit can be heard before its receipt
	t.last = time.Now()
	c := t.byBroker[broker]
	if c == nil {
		c = &counts{}
		t.byBroker[broker] = c
	}
	c.deliveries++
	if dup {
		c.dup++
	}
	if id != nil && t.seen[*id] {
		c.replays++
		if dup {
			c.replayDup++
		}
	} else if dup {
		c.firstDup++
	}
	if id != nil {
		t.seen[*id] = true
	}
	if outcome != "" {
		t.outcomes[outcome]++
		if dup {
			t.dupOutcome[outcome]++
		}
	}
}

// on reports whether the consumer is connected to broker and subscribed.
func (t *tally) on(broker string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.broker == broker && t.subscribed
}

// connectedTo reports whether the consumer is connected to broker.
func (t *tally) connectedTo(broker string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.broker == broker
}

// hasAll reports whether every message was handled at least once.
func (t *tally) hasAll(msgs []feedMsg) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		if !t.seen[m.id] {
			return false
		}
	}
	return true
}

// quiet reports whether nothing is in hand and nothing arrived for d.
func (t *tally) quiet(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inHand == 0 && time.Since(t.last) >= d
}

// from returns the counts of one broker's deliveries.
func (t *tally) from(broker string) counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.byBroker[broker]; c != nil {
		return *c
	}
	return counts{}
}

// total sums the counts over every broker.
func (t *tally) total() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s counts
	for _, c := range t.byBroker {
		s.deliveries += c.deliveries
		s.dup += c.dup
		s.replays += c.replays
		s.replayDup += c.replayDup
		s.firstDup += c.firstDup
	}
	return s
}

// outcome returns how many deliveries were decided o, and how many of
// those arrived with DUP=1.
func (t *tally) outcome(o string) (n, dup int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outcomes[o], t.dupOutcome[o]
}
