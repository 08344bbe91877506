package failover

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/mqtt"
)

// guard is replayguard's consumer in the test process, wired as `replayguard
// run` wires it (the MQTT source over an engine over the embedded store),
// with a gate in front of the engine that a test closes to hold commits,
// and so acknowledgements, back.
type guard struct {
	Store  app.Store
	Engine *engine.Engine
	Gate   *gate
	Events *eventCounts

	cancel context.CancelFunc
	done   chan error
}

// startGuard opens the setup's store and runs a consumer on it until stop.
func startGuard(t testing.TB, s *setup) *guard {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStore(s.Config.Store, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, st, app.EngineOptions(s.Config))
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	g := &guard{Store: st, Engine: eng, Gate: &gate{next: eng}, Events: &eventCounts{}, done: make(chan error, 1)}
	mc := s.Config.MQTT
	c, err := mqtt.New(mqtt.Config{
		Brokers:         mc.Brokers,
		ClientID:        mc.ClientID,
		SessionExpiry:   time.Duration(mc.SessionExpiry),
		KeepAlive:       time.Duration(mc.KeepAlive),
		BatchSize:       mc.BatchSize,
		BatchLinger:     time.Duration(mc.BatchLinger),
		ReceiveMaximum:  uint16(mc.ReceiveMaximum),
		Filters:         []mqtt.Filter{{Topic: topicPrefix + "#", QoS: 1}},
		ConnectRetryMin: 20 * time.Millisecond,
		ConnectRetryMax: 200 * time.Millisecond,
		ConnectTimeout:  2 * time.Second,
		Logger:          testLogger(t),
		Observer:        g.Events,
	}, g.Gate)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	ctx, g.cancel = context.WithCancel(ctx)
	go func() { g.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		g.stop(t)
		g.Store.Close()
	})
	waitFor(t, "connected consumer", 10*time.Second, c.Ready)
	return g
}

// stop ends the consumer's Run (committing what it holds) and closes the
// engine; the store stays open for the checks. It may be called twice.
func (g *guard) stop(t testing.TB) {
	t.Helper()
	if g.cancel == nil {
		return
	}
	g.Gate.Open()
	g.cancel()
	g.cancel = nil
	if err := <-g.done; err != nil {
		t.Errorf("consumer Run: %v", err)
	}
	g.Engine.Close()
}

// high returns the highest sequence applied of every source.
func (g *guard) high() map[string]int64 {
	out := map[string]int64{}
	for _, s := range g.Engine.Sources() {
		out[s.Source[0]] = s.High
	}
	return out
}

// waitHigh waits until every source's highest applied sequence is want.
func (g *guard) waitHigh(t testing.TB, sources []string, want int64) {
	t.Helper()
	waitFor(t, "every source applied up to its last sequence", 30*time.Second, func() bool {
		h := g.high()
		for _, s := range sources {
			if h[s] != want {
				return false
			}
		}
		return true
	})
}

// delivered is one delivery the consumer passed to a successful commit,
// with the decision the engine returned for it.
type delivered struct {
	msg engine.Message
	dec engine.Decision
}

// gate passes batches to the engine unless a test has closed it, and
// records every delivery of a successful commit.
type gate struct {
	next mqtt.Processor
	hold sync.RWMutex // read-held by a commit, write-held while the gate is closed
	shut atomic.Bool

	mu        sync.Mutex
	delivered []delivered
}

// Process waits for an open gate, then decides and commits the batch.
func (g *gate) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	g.hold.RLock()
	defer g.hold.RUnlock()
	ds, err := g.next.Process(ctx, msgs)
	if err == nil {
		g.mu.Lock()
		for i := range msgs {
			g.delivered = append(g.delivered, delivered{msg: msgs[i], dec: ds[i]})
		}
		g.mu.Unlock()
	}
	return ds, err
}

// Close waits for a commit in progress, then holds every later one back
// until Open.
func (g *gate) Close() {
	if g.shut.CompareAndSwap(false, true) {
		g.hold.Lock()
	}
}

// Open lets commits through again.
func (g *gate) Open() {
	if g.shut.CompareAndSwap(true, false) {
		g.hold.Unlock()
	}
}

// Delivered returns every delivery committed so far, in commit order.
func (g *gate) Delivered() []delivered {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]delivered(nil), g.delivered...)
}

// checkDeliveries proves that every committed delivery has its audit
// record, and nothing else does: the decisions' positions are exactly 1…N,
// and the record at each position names the delivery's topic, outcome,
// DUP flag and broker.
func checkDeliveries(t testing.TB, ds []delivered, records []engine.AuditRecord) {
	t.Helper()
	if len(ds) != len(records) {
		t.Errorf("%d deliveries committed, %d audit records", len(ds), len(records))
	}
	seen := make([]bool, len(records)+1)
	errs := 0
	for _, d := range ds {
		p := d.dec.Position
		if p == 0 || p > uint64(len(records)) || seen[p] {
			if errs++; errs <= maxErrors {
				t.Errorf("delivery %s has audit position %d (of %d), or shares it", d.msg.Topic, p, len(records))
			}
			continue
		}
		seen[p] = true
		rec := records[p-1]
		if rec.Topic != d.msg.Topic || rec.Outcome != d.dec.Outcome.String() || rec.Dup != d.msg.Dup || rec.Broker != d.msg.Broker {
			if errs++; errs <= maxErrors {
				t.Errorf("audit record %d (%s %s dup=%v via %s) does not match its delivery (%s %s dup=%v via %s)",
					p, rec.Topic, rec.Outcome, rec.Dup, rec.Broker, d.msg.Topic, d.dec.Outcome, d.msg.Dup, d.msg.Broker)
			}
		}
	}
}

// eventCounts adds up the consumer's events by kind.
type eventCounts struct {
	n [16]atomic.Int64
}

func (c *eventCounts) Observe(e source.Event) {
	if int(e.Kind) < len(c.n) {
		c.n[e.Kind].Add(int64(max(e.N, 1)))
	}
}

// Count is the sum of N over the events of kind k (1 for events without N).
func (c *eventCounts) Count(k source.EventKind) int64 { return c.n[k].Load() }
