package consumetest

import (
	"sync"

	"github.com/replayguard/replayguard/source"
)

// Events is an Observer that records every event.
type Events struct {
	mu  sync.Mutex
	all []source.Event
}

// Observe records ev.
func (e *Events) Observe(ev source.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// Sum adds N over the events of kind k (an event without N counts 1).
func (e *Events) Sum(k source.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k {
			n += max(ev.N, 1)
		}
	}
	return n
}

// Last returns the last event of kind k.
func (e *Events) Last(k source.EventKind) (source.Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if e.all[i].Kind == k {
			return e.all[i], true
		}
	}
	return source.Event{}, false
}
