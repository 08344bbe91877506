package jetstream

import (
	"context"
	"sync"
	"time"
)

// holding is the messages the consumer holds unacknowledged, from their
// receipt to their ack or nak, whatever they wait for: in the receive
// queue, decided, committing, in a commit retried or hung, or committed
// behind a batch that must commit first. keep tells the server that each
// of them is in progress before AckWait runs out, so that none is
// delivered again while in hand. Its methods are safe for concurrent use.
type holding struct {
	every time.Duration // how often keep looks, and how long a message goes untold
	mu    sync.Mutex
	told  map[acker]time.Time // when the server last heard of each message
}

// newHolding returns a holding for a consumer whose server waits ackWait:
// a message held is told in progress within ackWait/2 of the last time
// the server heard of it.
func newHolding(ackWait time.Duration) *holding {
	return &holding{every: ackWait / 4, told: map[acker]time.Time{}}
}

// add holds m, delivered at.
func (h *holding) add(m acker, at time.Time) {
	h.mu.Lock()
	h.told[m] = at
	h.mu.Unlock()
}

// len is how many messages are held.
func (h *holding) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.told)
}

// release lets go of batch's messages. It is called before they are
// acknowledged, positively or not: no in-progress signal follows.
func (h *holding) release(batch []delivery) {
	h.mu.Lock()
	for i := range batch {
		delete(h.told, batch[i].js)
	}
	h.mu.Unlock()
}

// keep tells the server, until ctx is done, that the messages held are in
// progress, each once it has gone untold for every.
func (h *holding) keep(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			h.tell(time.Now())
		case <-ctx.Done():
			return
		}
	}
}

func (h *holding) tell(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for m, at := range h.told {
		if now.Sub(at) >= h.every {
			_ = m.InProgress() // resets the server's AckWait; sent before any ack of m (release)
			h.told[m] = now
		}
	}
}
