package mqtt

import (
	"sync"
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
}

// dead reports whether the delivery's connection is gone. Its packet id
// then belongs to a session state the next connection may reuse for another
// message, so it must never be acknowledged.
func (d *delivery) dead() bool { return !d.gate.live(d.gen) }

// queue holds deliveries between paho's receive goroutine and the batching
// loop. push never blocks: blocking would stop paho reading, PINGRESPs
// included. Deliveries of connections that have died stay: they are in
// hand, and a standby broker may not have them, so they are decided and
// committed like the others (never acknowledged). The broker bounds what a
// connection sends by the Receive Maximum — loosely: Mosquitto exceeds it
// when it resumes a session with a backlog — so the queue holds what the
// broker sent and nothing is ever dropped from it.
type queue struct {
	bound int // the expected size, a sizing hint

	mu     sync.Mutex
	items  []delivery // items[head:] are queued; the array is reused
	head   int
	closed bool
	ready  chan struct{} // holds a token when items is not empty
}

func newQueue(bound int) *queue {
	return &queue{bound: bound, ready: make(chan struct{}, 1)}
}

// open makes the queue accept deliveries again, for a new Run.
func (q *queue) open() {
	q.mu.Lock()
	q.closed = false
	q.mu.Unlock()
}

// push appends d. It reports false when the queue is closed.
func (q *queue) push(d delivery) (ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if len(q.items) == cap(q.items) && q.head >= len(q.items)/2 {
		q.compact() // reuse the array rather than grow it
	}
	q.items = append(q.items, d)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// take appends up to n deliveries, oldest first, to dst.
func (q *queue) take(dst []delivery, n int) []delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, q.len())
	taken := q.items[q.head : q.head+n]
	dst = append(dst, taken...)
	clear(taken)
	q.head += n
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	if q.len() > 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return dst
}

// close stops accepting deliveries and returns those left.
func (q *queue) close() []delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	rest := q.items[q.head:]
	q.items, q.head = nil, 0
	return rest
}

// len is the number of deliveries queued. Called with mu held.
func (q *queue) len() int { return len(q.items) - q.head }

// compact moves the queued deliveries to the front of the array. Called
// with mu held.
func (q *queue) compact() {
	if q.head == 0 {
		return
	}
	n := copy(q.items, q.items[q.head:])
	clear(q.items[n:])
	q.items, q.head = q.items[:n], 0
}
