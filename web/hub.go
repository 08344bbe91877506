package web

import (
	"encoding/json"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Hub buffer and client limits.
const (
	subscriberBuffer = 1024 // events a slow client may lag behind before it loses some
	maxSubscribers   = 64
)

// Hub fans committed decisions and entity changes out to event-stream
// clients and counts decisions for the dashboard, in all and per second
// over the last 15 minutes (Rates), so that a reloaded dashboard draws its
// charts from the server's history. It implements
// engine.Observer and never blocks the engine: a client whose buffer is
// full loses events and is told to refetch. A Hub is safe for concurrent
// use and owns no goroutine.
type Hub struct {
	mu       sync.Mutex
	started  time.Time
	subs     map[*subscriber]struct{}
	decided  map[string]uint64 // deliveries by outcome
	resolved map[string]uint64 // operator actions by audited outcome
	rates    rateRing          // deliveries per second by outcome
	position uint64            // the last audit position counted
	now      func() time.Time  // the clock that ends a Rates window
}

type event struct {
	name string
	data []byte
}

type subscriber struct {
	ch   chan event
	lost atomic.Bool // events were dropped: the client must refetch
}

// NewHub returns a Hub with no clients.
func NewHub() *Hub {
	h := &Hub{started: time.Now().UTC(), subs: map[*subscriber]struct{}{},
		decided: map[string]uint64{}, resolved: map[string]uint64{}, now: time.Now}
	for _, o := range engine.Outcomes() {
		h.decided[o.String()] = 0
	}
	return h
}

// entityEvent is the data of a `state` event: one entity, its fields as
// /api/v1/state shows them.
type entityEvent struct {
	Name   string                     `json:"name"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// Committed counts the commit's decisions, in all and in the second of
// each record's time, and queues a `decision` event per
// record and a `state` event per changed entity for every client. It
// implements engine.Observer.
func (h *Hub) Committed(records []engine.AuditRecord, entities []engine.EntityState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now().Unix()
	for i := range records {
		r := &records[i]
		h.position = max(h.position, r.Position)
		if r.Ref != 0 {
			h.resolved[r.Outcome]++
			continue
		}
		h.decided[r.Outcome]++
		if o, ok := outcomeIndex[r.Outcome]; ok {
			h.rates.add(r.Time.Unix(), o, now)
		}
	}
	if len(h.subs) == 0 {
		return
	}
	events := make([]event, 0, len(records)+len(entities))
	for i := range records {
		data, _ := engine.AppendRecordJSON(nil, &records[i]) // json.Marshal's bytes; a committed record's time never fails
		events = append(events, event{"decision", data})
	}
	for name, fields := range engine.StateJSON(entities) {
		data, _ := json.Marshal(entityEvent{Name: name, Fields: fields})
		events = append(events, event{"state", data})
	}
	for s := range h.subs {
		for _, ev := range events {
			select {
			case s.ch <- ev:
			default:
				s.lost.Store(true)
			}
		}
	}
}

// subscribe adds a client; it returns nil when there are too many.
func (h *Hub) subscribe() *subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= maxSubscribers {
		return nil
	}
	s := &subscriber{ch: make(chan event, subscriberBuffer)}
	h.subs[s] = struct{}{}
	return s
}

func (h *Hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// Counts are the decisions a Hub has seen since it started.
type Counts struct {
	Since     time.Time         `json:"since"`
	Decisions map[string]uint64 `json:"decisions"` // deliveries by outcome
	Resolved  map[string]uint64 `json:"resolved"`  // releases and discards by audited outcome
}

// Counts returns a copy of the counts.
func (h *Hub) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Counts{Since: h.started, Decisions: maps.Clone(h.decided), Resolved: maps.Clone(h.resolved)}
}
