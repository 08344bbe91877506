package consume

import "sync"

// Queue holds deliveries between a client library's receive goroutine and
// a consumer's batching loop, oldest first. Push never blocks: blocking
// would stop the library reading the connection, keepalive answers
// included. The broker bounds what a connection sends unacknowledged (MQTT
// 5 Receive Maximum, an MQTT 3.1.1 broker's in-flight limit) — loosely:
// Mosquitto exceeds it when it resumes a session with a backlog — so the
// queue holds what the broker sent and never drops any of it, deliveries of
// connections that died included: they are in hand, and a standby broker
// may not have them. Its methods are safe for concurrent use.
type Queue[D any] struct {
	mu     sync.Mutex
	items  []D // items[head:] are queued; the array is reused
	head   int
	closed bool
	ready  chan struct{} // holds a token when items is not empty
}

// NewQueue returns an open, empty Queue.
func NewQueue[D any]() *Queue[D] { return &Queue[D]{ready: make(chan struct{}, 1)} }

// Ready holds a token while the queue may hold deliveries: a receive from
// it is the wait for the next Take.
func (q *Queue[D]) Ready() <-chan struct{} { return q.ready }

// Open makes the queue accept deliveries again, for a new Run.
func (q *Queue[D]) Open() {
	q.mu.Lock()
	q.closed = false
	q.mu.Unlock()
}

// Push appends d. It reports false when the queue is closed.
func (q *Queue[D]) Push(d D) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if len(q.items) == cap(q.items) && q.head >= len(q.items)/2 {
		q.compact() // reuse the array rather than grow it
	}
	q.items = append(q.items, d)
	q.signal()
	return true
}

// Take appends up to n deliveries, oldest first, to dst.
func (q *Queue[D]) Take(dst []D, n int) []D {
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

// Close stops accepting deliveries and returns those left.
func (q *Queue[D]) Close() []D {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	rest := q.items[q.head:]
	q.items, q.head = nil, 0
	return rest
}

// compact moves the queued deliveries to the front of the array. Called
// with mu held.
func (q *Queue[D]) compact() {
	if q.head == 0 {
		return
	}
	n := copy(q.items, q.items[q.head:])
	clear(q.items[n:])
	q.items, q.head = q.items[:n], 0
}

// signal leaves a token in ready. Called with mu held.
func (q *Queue[D]) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}
