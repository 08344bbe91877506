package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/store/memory"
)

// groupMember is memory.Member embedded under another name: Member is one
// of its methods.
type groupMember = memory.Member

// heldThenDown is a group member whose first batch finds the source row of
// unit e1 held by another member (engine.Reads.SkipHeld), and whose store
// is down for every Update after that one: the batch commits its first
// part, and its second part, and every attempt after, fail.
type heldThenDown struct {
	*groupMember
	held    string
	updates int
}

func (h *heldThenDown) Capabilities() engine.Capabilities {
	c := h.groupMember.Capabilities()
	c.Shared = h
	return c
}

func (h *heldThenDown) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if h.updates++; h.updates > 1 {
		return errors.New("store down")
	}
	return h.groupMember.Update(ctx, r, func(rows *engine.Rows) (*engine.Batch, error) {
		if r.SkipHeld && slices.Contains(r.Sources, h.held) {
			rows.Sources = slices.DeleteFunc(rows.Sources, func(s engine.SourceState) bool { return s.ID() == h.held })
			rows.Held = engine.HeldRows{Sources: []string{h.held}}
		}
		return decide(rows)
	})
}

// TestASplitBatchAbandonedAtAStopIsNotCountedTwice: a batch on a shared
// store commits the deliveries whose rows no other member holds, then the
// store goes down and the stop cannot commit the rest. The deliveries the
// first part committed are decided (counted in decisions_total) and must
// not be counted abandoned as well: every delivery received ends decided
// or abandoned, once (in flight 0).
func TestASplitBatchAbandonedAtAStopIsNotCountedTwice(t *testing.T) {
	route := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"}, Sequence: "sequence",
		Effects: []engine.EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "delta"}}}}
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "v1", "abc", route.Name)
	member, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	held := engine.SourceState{Route: route.Name, Source: []string{"fd", "e1"}}
	st := &heldThenDown{groupMember: member, held: held.ID()}
	e, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{route}, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	type delivery struct{ msg engine.Message }
	msg := func(d *delivery) *engine.Message { return &d.msg }
	var batch []delivery
	for i, unit := range []string{"e1", "e2", "e3"} {
		batch = append(batch, delivery{engine.Message{Topic: "incidents/fd", Payload: fmt.Appendf(nil,
			`{"agency":"fd","source_id":%q,"sequence":1,"incident_id":"%d","delta":1}`, unit, i)}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	drainCtx, stopDrain := context.WithCancel(context.Background())
	failed := 0
	obs := source.ObserverFunc(func(ev source.Event) {
		m.Observe(ev)
		if ev.Kind == source.CommitFailed {
			if failed++; failed == 1 {
				cancel() // the stop comes while the batch is committed
			} else {
				stopDrain() // and the drain cannot commit it either
			}
		}
	})
	obs.Observe(source.Event{Kind: source.Received, N: len(batch)})
	c := NewCommitter("test", e, Backoff{Min: time.Millisecond, Max: time.Millisecond}, obs, slog.New(slog.DiscardHandler))
	commit := CommitMessages(c, msg)
	if err := commit(ctx, batch); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit = %v, want context.Canceled", err)
	}
	b := &Batches[delivery]{Name: "test", Queue: NewQueue[delivery](), Size: 3, Commit: commit,
		BeforeAck: func(time.Time) {}, Ack: func([]delivery) { t.Error("a delivery was acknowledged") },
		Msg: msg, Log: slog.New(slog.DiscardHandler), Observer: obs}
	b.Drain(drainCtx, batch, nil, nil)
	cancel()
	stopDrain()

	if got := testutil.ToFloat64(counterOf(t, reg, "replayguard_decisions_total")); got != 2 {
		t.Fatalf("%v decisions counted, want the 2 of the first part", got)
	}
	inFlight := testutil.ToFloat64(counterOf(t, reg, "replayguard_in_flight"))
	abandoned := testutil.ToFloat64(counterOf(t, reg, "replayguard_abandoned_total"))
	ackDropped := testutil.ToFloat64(counterOf(t, reg, "replayguard_ack_dropped_total"))
	if inFlight != 0 || abandoned != 1 || ackDropped != 2 {
		t.Errorf("after the stop: in flight %v, abandoned %v, ack dropped %v; want 0, 1 (e1, never decided) and 2 (e2, e3: committed, not acknowledged)",
			inFlight, abandoned, ackDropped)
	}
}

// counterOf collects the sum of the samples of the metric named name.
func counterOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return sumCollector{reg: reg, name: name}
}

type sumCollector struct {
	reg  *prometheus.Registry
	name string
}

var sumDesc = prometheus.NewDesc("sum", "sum of a metric's samples", nil, nil)

func (s sumCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sumDesc }

func (s sumCollector) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := s.reg.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != s.name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			switch {
			case mm.Counter != nil:
				total += mm.Counter.GetValue()
			case mm.Gauge != nil:
				total += mm.Gauge.GetValue()
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(sumDesc, prometheus.GaugeValue, total)
}
