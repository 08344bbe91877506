package failover

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
)

// spEdge is a Sparkplug B edge node on MQTT, as Sparkplug 3.0 has it: each
// session is one MQTT connection whose Will is the session's NDEATH (with
// its bdSeq), so the broker publishes the death when the connection ends
// without a DISCONNECT; a new connection is a new session, with the next
// bdSeq and an NBIRTH first. Messages go out at QoS 1, one at a time, in
// order. The edge records every message the broker acknowledged, with the
// identity the engine gives it: the ground truth of a test. Its methods
// are for one goroutine at a time; Sent is safe to call from any.
type spEdge struct {
	t       testing.TB
	brokers []string
	edge    *sparkplug.Edge
	pub     *testbroker.Publisher
	last    time.Time // the last timestamp given: each message's is later
	bdSeq   int64     // the session's bdSeq, unwrapped: the engine's epoch
	next    int64     // the unwrapped seq of the session's next message
	started bool

	mu      sync.Mutex
	sent    []spSent
	pending spSent        // the session's NDEATH, registered as the Will
	copies  map[spKey]int // replayed copies per message
}

// spKey names one message of an edge: its session (the engine's epoch)
// and unwrapped seq, -1 for the session's NDEATH.
type spKey struct {
	Epoch string
	Seq   int64
}

func (k spKey) String() string { return fmt.Sprintf("%s#%d", k.Epoch, k.Seq) }

// spSent is one message the broker acknowledged (or, for an NDEATH,
// published as the Will).
type spSent struct {
	spKey
	Type     string // NBIRTH, NDATA, NDEATH
	Msg      sparkplug.Message
	Quarters int64 // the Energy metric, in quarters of a kWh
	Temp     int64 // the Temperature metric
}

// newSpEdge returns an edge of group whose first session will have bdSeq.
func newSpEdge(t testing.TB, brokers []string, group, node string, bdSeq uint64) *spEdge {
	return &spEdge{t: t, brokers: brokers, edge: sparkplug.NewEdge(group, node, bdSeq), bdSeq: int64(bdSeq),
		copies: map[spKey]int{}}
}

// now is a timestamp later than every one given before.
func (e *spEdge) now() time.Time {
	ts := time.Now().Truncate(time.Millisecond)
	if !ts.After(e.last) {
		ts = e.last.Add(time.Millisecond)
	}
	e.last = ts
	return ts
}

func (e *spEdge) epoch() string { return strconv.FormatInt(e.bdSeq, 10) }

// connect opens the edge's next session: a new MQTT connection whose Will
// is its NDEATH, after the first with the next bdSeq. Birth must follow.
func (e *spEdge) connect() {
	e.t.Helper()
	if e.started {
		e.edge.NewSession()
		e.bdSeq++
	}
	e.started, e.next = true, 0
	death := e.edge.Death(e.now())
	e.pub = testbroker.NewPublisher(e.t, e.brokers, testbroker.PublisherOptions{
		ClientID: testbroker.UniqueClientID("rg-edge"),
		Will:     &testbroker.Will{Topic: death.Topic, Payload: death.Payload, QoS: 1},
	})
	e.mu.Lock()
	e.pending = spSent{spKey: spKey{e.epoch(), -1}, Type: "NDEATH", Msg: death}
	e.mu.Unlock()
}

// birth publishes the session's NBIRTH (seq 0) with metrics.
func (e *spEdge) birth(metrics []sparkplug.Metric) {
	e.t.Helper()
	m := e.edge.Birth(e.now(), metrics)
	s := spSent{spKey: spKey{e.epoch(), 0}, Type: "NBIRTH", Msg: m}
	for _, mt := range metrics {
		switch mt.Name {
		case "Energy":
			s.Quarters = int64(mt.Value.(float64) * 4)
		case "Temperature":
			s.Temp = mt.Value.(int64)
		}
	}
	e.next = 1
	if !e.send(s) {
		e.t.Fatalf("the broker did not acknowledge %s's NBIRTH", s.spKey)
	}
}

// data publishes an NDATA of the Energy and Temperature metrics, by alias,
// and reports whether the broker acknowledged it.
func (e *spEdge) data(quarters, temp int64) bool {
	m := e.edge.Data(e.now(), []sparkplug.Metric{
		{Name: "Energy", Value: float64(quarters) / 4},
		{Name: "Temperature", Datatype: sparkplug.Int32, Value: temp},
	})
	s := spSent{spKey: spKey{e.epoch(), e.next}, Type: "NDATA", Msg: m, Quarters: quarters, Temp: temp}
	e.next++
	return e.send(s)
}

func (e *spEdge) send(s spSent) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !e.pub.Send(ctx, s.Msg.Topic, s.Msg.Payload) {
		return false
	}
	e.mu.Lock()
	e.sent = append(e.sent, s)
	e.mu.Unlock()
	return true
}

// replay publishes msgs again, as they were, on the current connection: a
// gateway sending again what it sent before. Each must be acknowledged.
func (e *spEdge) replay(msgs []spSent) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range msgs {
		if !e.pub.Send(ctx, s.Msg.Topic, s.Msg.Payload) {
			e.t.Fatalf("the broker did not acknowledge the copy of %s", s.spKey)
		}
		e.mu.Lock()
		e.copies[s.spKey]++
		e.mu.Unlock()
	}
}

// drop ends the session's connection as a crash does: the broker publishes
// its NDEATH, the Will.
func (e *spEdge) drop() {
	e.pub.Drop()
	e.mu.Lock()
	e.sent = append(e.sent, e.pending)
	e.mu.Unlock()
}

// end forgets the session's connection, one the broker's death ended: a
// restarted broker has no Will for it (the session did not persist).
func (e *spEdge) end() { e.pub.Close() }

// Sent returns the messages acknowledged so far, in publish order.
func (e *spEdge) Sent() []spSent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]spSent(nil), e.sent...)
}

// Copies returns the replayed copies per message so far, and their total.
func (e *spEdge) Copies() (map[spKey]int, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out, n := make(map[spKey]int, len(e.copies)), 0
	for k, c := range e.copies {
		out[k] = c
		n += c
	}
	return out, n
}

// between returns the session's acknowledged messages with unwrapped seq
// from lo to hi.
func (e *spEdge) between(epoch string, lo, hi int64) []spSent {
	var out []spSent
	for _, s := range e.Sent() {
		if s.Epoch == epoch && s.Seq >= lo && s.Seq <= hi {
			out = append(out, s)
		}
	}
	return out
}
