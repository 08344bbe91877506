package sparkplug_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
	"github.com/replayguard/replayguard/store/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbroker.CleanupPostgres() // the template data directory the shared-store tests made
		os.Exit(code)
	}))
}

var plantRoute = engine.Route{
	Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
	Effects: []engine.EffectSpec{
		{Entity: "meter/{topic[3]}", Set: map[string]string{"kwh": "metrics.Energy", "temp": "metrics.Temperature"},
			Add: map[string]string{"pulses": "metrics.Pulses"}},
		{Entity: "dev/{topic[3]}/{topic[4]}", Set: map[string]string{"state": "metrics.Node Control/State"}},
	},
}

type harness struct {
	t     *testing.T
	e     *engine.Engine
	store engine.Store
	clock time.Time
}

func newHarness(t *testing.T, store engine.Store) *harness {
	t.Helper()
	return newHarnessWith(t, store, nil)
}

// newHarnessWith is newHarness with the engine's options changed by set
// (when not nil) before the engine opens.
func newHarnessWith(t *testing.T, store engine.Store, set func(*engine.Options)) *harness {
	t.Helper()
	if store == nil {
		store = memory.New()
	}
	h := &harness{t: t, store: store, clock: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	opts := engine.Options{Routes: []engine.Route{plantRoute},
		Kinds: []engine.RouteKind{sparkplug.RouteKind{}}, Now: func() time.Time { return h.clock }}
	if set != nil {
		set(&opts)
	}
	e, err := engine.New(context.Background(), store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	h.e = e
	return h
}

// keyTTL is the group stores' key TTL in these tests (memory and
// PostgreSQL): they prune keys by the wall clock, and the harness's clock
// is a fixed day in the past, so with a shorter TTL a pruning run deletes
// every key a test applied.
const keyTTL = 100 * 365 * 24 * time.Hour

// onEveryStore runs test on a single-owner store and on a member of a
// consumer group's store, where each batch reads the edge's session row
// before the keys and entities its messages imply.
func onEveryStore(t *testing.T, test func(t *testing.T, store engine.Store)) {
	t.Run("single-owner", func(t *testing.T) { test(t, memory.New()) })
	t.Run("group", func(t *testing.T) { test(t, memoryGroup(t)("m1")) })
}

// memoryGroup is a consumer group on the memory store, its keys kept
// keyTTL: each call opens a member, closed at the end of t.
func memoryGroup(t *testing.T) func(id string) engine.Store {
	g := memory.NewGroup(keyTTL, 10_000)
	return func(id string) engine.Store {
		m, err := g.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
}

// send decides msgs in one batch.
func (h *harness) send(msgs ...sparkplug.Message) []engine.Decision {
	h.t.Helper()
	in := make([]engine.Message, len(msgs))
	for i, m := range msgs {
		in[i] = engine.Message{Topic: m.Topic, Payload: m.Payload}
	}
	h.clock = h.clock.Add(time.Second)
	out, err := h.e.Process(context.Background(), in)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// expect decides msgs and checks each outcome.
func (h *harness) expect(want engine.Outcome, msgs ...sparkplug.Message) []engine.Decision {
	h.t.Helper()
	out := h.send(msgs...)
	for i, d := range out {
		if d.Outcome != want {
			h.t.Fatalf("message %d (%s): %s (%s), want %s", i, msgs[i].Topic, d.Outcome, d.Reason, want)
		}
	}
	return out
}

func (h *harness) state() map[string]map[string]json.RawMessage {
	return engine.StateJSON(h.e.State())
}

func (h *harness) field(entity, name string) string {
	h.t.Helper()
	return string(h.state()[entity][name])
}

func (h *harness) source(edge string) engine.SourceReport {
	h.t.Helper()
	for _, r := range h.e.Sources() {
		if r.Source[1] == edge {
			return r
		}
	}
	h.t.Fatalf("no source for edge %q in %+v", edge, h.e.Sources())
	return engine.SourceReport{}
}

// clock gives an edge's messages increasing timestamps.
type clock struct{ t time.Time }

func (c *clock) next() time.Time {
	c.t = c.t.Add(10 * time.Millisecond)
	return c.t
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)} }

var meterMetrics = []sparkplug.Metric{
	{Name: "Energy", Datatype: sparkplug.Double, Value: 0.0},
	{Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(0)},
	{Name: "Temperature", Datatype: sparkplug.Int32, Value: int64(20)},
}

func pulse() []sparkplug.Metric {
	return []sparkplug.Metric{{Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(1)}}
}

// rewriteAlias changes a metric's alias in an encoded payload.
func rewriteAlias(t *testing.T, payload []byte, from, to uint64) []byte {
	t.Helper()
	var p pb.Payload
	if err := proto.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Metrics {
		if m.GetAlias() == from {
			m.Alias = proto.Uint64(to)
		}
	}
	b, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
