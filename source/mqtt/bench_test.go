package mqtt_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/mqtt"
)

// The consume benchmarks run once per sub-benchmark and report msg/s:
//
//	go test ./source/mqtt -run '^$' -bench Consume -benchtime 1x
//
// "backlog" times the drain of messages queued in the consumer's session
// while it was offline: the consumer's own ceiling. "live" times a publisher
// (window 100) and the consumer together: what one publisher reaches end to
// end. REPLAYGUARD_BENCH_SWEEP=1 adds BenchmarkConsumeSweep over batch
// size, linger and receive maximum.

const benchMessages = 10000

// countingProcessor commits instantly, or after a fixed delay per batch
// standing in for a store's group commit.
type countingProcessor struct {
	delay time.Duration
	n     atomic.Int64
	calls atomic.Int64
}

func (p *countingProcessor) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if p.delay > 0 {
		time.Sleep(p.delay)
	}
	p.n.Add(int64(len(msgs)))
	p.calls.Add(1)
	return nil, nil
}

// lagObserver collects the ack lag of each acknowledged run.
type lagObserver struct {
	mu   sync.Mutex
	lags []time.Duration
}

func (o *lagObserver) Observe(e source.Event) {
	if e.Kind == source.Acked {
		o.mu.Lock()
		o.lags = append(o.lags, e.Lag)
		o.mu.Unlock()
	}
}

func (o *lagObserver) p50() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.lags) == 0 {
		return 0
	}
	sort.Slice(o.lags, func(i, j int) bool { return o.lags[i] < o.lags[j] })
	return o.lags[len(o.lags)/2]
}

// benchTopic gives each run a publisher on a topic of its own, so the
// offline sessions earlier runs leave behind queue nothing of it.
func benchTopic(b *testing.B, m *testbroker.Mosquitto, window int) (*testbroker.Publisher, string) {
	prefix := testbroker.UniqueClientID("bench") + "/"
	pub := testbroker.NewPublisher(b, []string{m.URL()}, testbroker.PublisherOptions{
		Window: window,
		Topic:  func(source string) string { return prefix + source },
	})
	return pub, prefix + "#"
}

func BenchmarkConsume(b *testing.B) {
	m := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})

	b.Run("publish-only", func(b *testing.B) {
		for b.Loop() {
			pub, _ := benchTopic(b, m, 100)
			r := testbroker.MeasurePublish(b, pub, benchMessages)
			b.ReportMetric(r.PerSecond(), "msg/s")
		}
	})
	b.Run("paho-autoack/backlog", func(b *testing.B) {
		for b.Loop() {
			pub, filter := benchTopic(b, m, 100)
			id := testbroker.UniqueClientID("rg-bench")
			testbroker.StartAutoAckConsumer(b, m.URL(), id, filter).Close()
			var c *testbroker.AutoAckConsumer
			r := testbroker.MeasureBacklog(b, pub, benchMessages, func() func() int64 {
				c = testbroker.StartAutoAckConsumer(b, m.URL(), id, filter)
				return c.Received
			})
			c.Close()
			b.ReportMetric(r.PerSecond(), "msg/s")
		}
	})
	b.Run("paho-autoack/live", func(b *testing.B) {
		for b.Loop() {
			pub, filter := benchTopic(b, m, 100)
			c := testbroker.StartAutoAckConsumer(b, m.URL(), testbroker.UniqueClientID("rg-bench"), filter)
			r := testbroker.MeasureLive(b, pub, benchMessages, c.Received)
			c.Close()
			b.ReportMetric(r.PerSecond(), "msg/s")
		}
	})
	cfg := mqtt.Config{} // the defaults
	b.Run("consumer/backlog/"+describe(cfg), func(b *testing.B) { benchBacklog(b, m, cfg, 0) })
	b.Run("consumer/live/"+describe(cfg), func(b *testing.B) { benchLive(b, m, cfg, 0) })
	b.Run("consumer/backlog/commit-2ms/"+describe(cfg), func(b *testing.B) { benchBacklog(b, m, cfg, 2*time.Millisecond) })
	b.Run("consumer/live/commit-2ms/"+describe(cfg), func(b *testing.B) { benchLive(b, m, cfg, 2*time.Millisecond) })
}

// BenchmarkConsumeSweep measures what the defaults were chosen from:
// the median of three runs per configuration, interleaved, printed as a
// table (run with -v).
func BenchmarkConsumeSweep(b *testing.B) {
	if os.Getenv("REPLAYGUARD_BENCH_SWEEP") != "1" {
		b.Skip("set REPLAYGUARD_BENCH_SWEEP=1")
	}
	type point struct {
		mode      string // backlog, live (publisher window 100) or trickle (window 1)
		delay     time.Duration
		cfg       mqtt.Config
		rates     []float64
		lagsUS    []float64
		perCommit []float64
	}
	var points []*point
	add := func(mode string, delay time.Duration, size int, linger time.Duration, rm uint16) {
		points = append(points, &point{mode: mode, delay: delay,
			cfg: mqtt.Config{BatchSize: size, BatchLinger: linger, ReceiveMaximum: rm}})
	}
	for _, size := range []int{1, 16, 64, 256, 1024} {
		add("backlog", 0, size, 0, 0)
	}
	for _, rm := range []uint16{256, 4096} {
		add("backlog", 0, 256, 0, rm)
	}
	for _, size := range []int{16, 64, 256, 1024} {
		add("backlog", 2*time.Millisecond, size, 0, 0)
	}
	for _, linger := range []time.Duration{100 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond} {
		add("live", 0, 256, linger, 0)
		add("trickle", 0, 256, linger, 0)
		add("trickle", 2*time.Millisecond, 256, linger, 0)
	}

	m := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	for b.Loop() {
		for range 3 {
			for _, pt := range points {
				var res measured
				switch pt.mode {
				case "backlog":
					res = measureBacklog(b, m, pt.cfg, pt.delay)
				case "live":
					res = measureLive(b, m, pt.cfg, pt.delay, 100)
				case "trickle":
					res = measureLive(b, m, pt.cfg, pt.delay, 1)
				}
				pt.rates = append(pt.rates, res.rate.PerSecond())
				pt.lagsUS = append(pt.lagsUS, float64(res.lag.Microseconds()))
				pt.perCommit = append(pt.perCommit, res.perCommit)
			}
		}
	}
	b.Logf("%-8s %-7s %-36s %10s %12s %10s", "mode", "commit", "config", "msg/s", "p50 lag µs", "msg/commit")
	for _, pt := range points {
		b.Logf("%-8s %-7v %-36s %10.0f %12.0f %10.1f", pt.mode, pt.delay, describe(pt.cfg),
			median(pt.rates), median(pt.lagsUS), median(pt.perCommit))
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func describe(cfg mqtt.Config) string {
	size, linger, rm := cfg.BatchSize, cfg.BatchLinger, cfg.ReceiveMaximum
	if size == 0 {
		size = mqtt.DefaultBatchSize
	}
	if linger == 0 {
		linger = mqtt.DefaultBatchLinger
	}
	if rm == 0 {
		rm = uint16(max(mqtt.DefaultReceiveMaximum, 2*size))
	}
	return fmt.Sprintf("batch=%d,linger=%v,rm=%d", size, linger, rm)
}

func benchConsumer(b *testing.B, m *testbroker.Mosquitto, filter string, cfg mqtt.Config, p mqtt.Processor) (*running, *lagObserver) {
	cfg.Brokers = []string{m.URL()}
	cfg.Filters = []mqtt.Filter{{Topic: filter, QoS: 1}}
	obs := &lagObserver{}
	cfg.Observer = obs
	r := start(b, cfg, p)
	r.waitReady(b)
	return r, obs
}

func benchBacklog(b *testing.B, m *testbroker.Mosquitto, cfg mqtt.Config, delay time.Duration) {
	for b.Loop() {
		measureBacklog(b, m, cfg, delay).report(b)
	}
}

func benchLive(b *testing.B, m *testbroker.Mosquitto, cfg mqtt.Config, delay time.Duration) {
	for b.Loop() {
		measureLive(b, m, cfg, delay, 100).report(b)
	}
}

type measured struct {
	rate      testbroker.Rate
	lag       time.Duration // median ack lag
	perCommit float64       // messages per Process call
}

func (m measured) report(b *testing.B) {
	b.ReportMetric(m.rate.PerSecond(), "msg/s")
	b.ReportMetric(float64(m.lag.Microseconds()), "p50-ack-lag-µs")
	b.ReportMetric(m.perCommit, "msg/commit")
}

func (p *countingProcessor) measured(rate testbroker.Rate, obs *lagObserver) measured {
	return measured{rate: rate, lag: obs.p50(), perCommit: float64(p.n.Load()) / float64(max(1, p.calls.Load()))}
}

// measureBacklog times the drain of benchMessages queued while the consumer
// was offline. Its ack lag includes the wait in the queue.
func measureBacklog(b *testing.B, m *testbroker.Mosquitto, cfg mqtt.Config, delay time.Duration) measured {
	pub, filter := benchTopic(b, m, 100)
	defer pub.Close()
	cfg.ClientID = testbroker.UniqueClientID("rg-bench")
	cfg.SessionExpiry = time.Minute
	r, _ := benchConsumer(b, m, filter, cfg, &countingProcessor{})
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
	var (
		obs *lagObserver
		p   = &countingProcessor{delay: delay}
	)
	rate := testbroker.MeasureBacklog(b, pub, benchMessages, func() func() int64 {
		r, obs = benchConsumer(b, m, filter, cfg, p)
		return p.n.Load
	})
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
	return p.measured(rate, obs)
}

// measureLive times benchMessages from a publisher with the given window
// through a connected consumer.
func measureLive(b *testing.B, m *testbroker.Mosquitto, cfg mqtt.Config, delay time.Duration, window int) measured {
	pub, filter := benchTopic(b, m, window)
	defer pub.Close()
	cfg.ClientID = testbroker.UniqueClientID("rg-bench")
	cfg.SessionExpiry = time.Minute
	p := &countingProcessor{delay: delay}
	r, obs := benchConsumer(b, m, filter, cfg, p)
	rate := testbroker.MeasureLive(b, pub, benchMessages, p.n.Load)
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
	return p.measured(rate, obs)
}
