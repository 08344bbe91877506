package mqtt3

import (
	"sync"
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
}

// queue holds deliveries between paho's router goroutine and the batching
// loop. push never blocks: blocking would stop paho reading the
// connection, PINGRESPs included. The broker bounds what one connection
// sends unacknowledged (its in-flight limit), so the queue holds what the
// broker sent and nothing is dropped from it. Deliveries of a connection
// that died stay: they are in hand, so they are decided and committed like
// the others (never acknowledged).
type queue struct {
	mu     sync.Mutex
	items  []delivery // items[head:] are queued; the array is reused
	head   int
	closed bool
	ready  chan struct{} // holds a token when items is not empty
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

// open makes the queue accept deliveries again, for a new Run.
func (q *queue) open() {
	q.mu.Lock()
	q.closed = false
	q.mu.Unlock()
}

// push appends d. It reports false when the queue is closed.
func (q *queue) push(d delivery) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if len(q.items) == cap(q.items) && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:]) // reuse the array rather than grow it
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, d)
	q.signal()
	return true
}

// take appends up to n deliveries, oldest first, to dst.
func (q *queue) take(dst []delivery, n int) []delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.items)-q.head)
	taken := q.items[q.head : q.head+n]
	dst = append(dst, taken...)
	clear(taken)
	q.head += n
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else {
		q.signal()
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

// signal leaves a token in ready. Called with mu held.
func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}
