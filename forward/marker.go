package forward

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// markAhead is how many delivered pages may wait for the marker, besides
// those it is marking, before the lane waits: so many more are sent again
// after a crash.
const markAhead = 4

// MaxPagesResent bounds the pages of a lane's delivered entries that a
// crash leaves unmarked, sent again at the next start: the page being
// delivered, the one whose hand-over waits for room, the markAhead pages
// waiting, and those the marker is marking (the one it took and the
// markAhead it found waiting then).
const MaxPagesResent = 1 + 1 + markAhead + (1 + markAhead)

// markFlush bounds how long a stopping lane's marker goes on marking what
// was delivered before the stop.
const markFlush = 10 * time.Second

// marker marks a lane's delivered entries done off the lane's path: the
// lane hands each delivered page over and goes on to the next while the
// marker commits, in one OutboxDone, every page waiting by then. Before,
// the lane made that commit itself, and on the embedded store it waited
// behind the engine's (one writer at a time, each synced). A mark that fails rewinds the lane, so
// the entries it left pending are sent again.
type marker struct {
	d       *Drainer
	l       *lane
	ctx     context.Context
	cancel  context.CancelFunc
	pages   chan []uint64
	waiting sync.WaitGroup // the pages handed over and not yet marked
	stopped chan struct{}

	mu  sync.Mutex
	err error // the first failed mark, until the lane takes it
}

// startMarker starts l's marker; stop ends it.
func (d *Drainer) startMarker(ctx context.Context, l *lane) *marker {
	m := &marker{d: d, l: l, pages: make(chan []uint64, markAhead), stopped: make(chan struct{})}
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx)) // marks outlive the lane's context, until stop
	go m.run()
	return m
}

// add hands over the IDs of a delivered page; it waits while markAhead
// pages wait for their marks.
func (m *marker) add(ctx context.Context, ids []uint64) error {
	m.waiting.Add(1)
	select {
	case m.pages <- ids: // with room, even when ctx is done: what was delivered is marked
		return nil
	default:
	}
	select {
	case m.pages <- ids:
		return nil
	case <-ctx.Done():
		m.waiting.Done()
		return ctx.Err()
	}
}

// wait waits until every page handed over is marked, or its mark failed.
// The lane calls it before it reads its outbox from the start.
func (m *marker) wait() { m.waiting.Wait() }

// takeErr returns the first mark that failed since the last call.
func (m *marker) takeErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.err
	m.err = nil
	return err
}

// stop marks what was handed over, for at most markFlush, and ends the
// marker. The lane calls it once, after its last add.
func (m *marker) stop() {
	close(m.pages)
	t := time.AfterFunc(markFlush, m.cancel)
	<-m.stopped
	t.Stop()
	m.cancel()
}

func (m *marker) run() {
	defer close(m.stopped)
	for ids := range m.pages {
		n := 1
	more:
		for {
			select {
			case next, ok := <-m.pages:
				if !ok {
					break more
				}
				ids = append(ids, next...)
				n++
			default:
				break more
			}
		}
		m.mark(ids)
		for range n {
			m.waiting.Done()
		}
	}
}

// mark commits ids done; on a failure the lane rewinds and sends them
// again.
func (m *marker) mark(ids []uint64) {
	l := m.l
	if l.own {
		m.d.removing(len(ids))
	}
	err := m.d.opts.Store.OutboxDone(m.ctx, l.id.member, ids)
	if l.own {
		m.d.removedNow(len(ids), err == nil)
	}
	if err != nil {
		m.mu.Lock()
		if m.err == nil {
			m.err = fmt.Errorf("mark %d delivered entries done (they are sent again): %w", len(ids), err)
		}
		m.mu.Unlock()
		l.rewind.Store(true)
		l.poke()
		return
	}
}
