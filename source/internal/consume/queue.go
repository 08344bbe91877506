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
//
// It keeps deliveries in blocks of queueBlock, not one array: a resumed
// session's backlog of tens of thousands grew an array by copying it again
// and again into fresh memory, 120 ms of page faults and copies per 50,000
// deliveries at every start.
type Queue[D any] struct {
	mu     sync.Mutex
	blocks [][]D // queued: blocks[0][head:], then the rest; each full but the last
	head   int
	n      int   // how many are queued
	spare  [][]D // emptied blocks, at most queueSpare, for the next pushes
	closed bool
	ready  chan struct{} // holds a token when the queue is not empty
}

// queueBlock is a block's length, and queueSpare how many emptied blocks a
// queue keeps: a backlog's memory goes back once it is taken.
const (
	queueBlock = 256
	queueSpare = 4
)

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
	last := len(q.blocks) - 1
	if last < 0 || len(q.blocks[last]) == queueBlock {
		q.blocks = append(q.blocks, q.block())
		last++
	}
	q.blocks[last] = append(q.blocks[last], d)
	q.n++
	q.signal()
	return true
}

// Take appends up to n deliveries, oldest first, to dst.
func (q *Queue[D]) Take(dst []D, n int) []D {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.take(dst, n)
}

// Close stops accepting deliveries and returns those left.
func (q *Queue[D]) Close() []D {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	return q.take(make([]D, 0, q.n), q.n)
}

// take is Take with mu held.
func (q *Queue[D]) take(dst []D, n int) []D {
	for n = min(n, q.n); n > 0; {
		b := q.blocks[0]
		taken := b[q.head:min(len(b), q.head+n)]
		dst = append(dst, taken...)
		clear(taken)
		q.head += len(taken)
		q.n -= len(taken)
		n -= len(taken)
		if q.head == len(b) {
			q.drop()
		}
	}
	if q.n > 0 {
		q.signal()
	}
	return dst
}

// block returns an empty block. Called with mu held.
func (q *Queue[D]) block() []D {
	if k := len(q.spare); k > 0 {
		b := q.spare[k-1]
		q.spare = q.spare[:k-1]
		return b
	}
	return make([]D, 0, queueBlock)
}

// drop removes the first block, all of it taken, keeping it as a spare.
// Called with mu held.
func (q *Queue[D]) drop() {
	if len(q.spare) < queueSpare {
		q.spare = append(q.spare, q.blocks[0][:0])
	}
	q.blocks[0] = nil
	q.blocks = append(q.blocks[:0], q.blocks[1:]...)
	q.head = 0
}

// signal leaves a token in ready. Called with mu held.
func (q *Queue[D]) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}
