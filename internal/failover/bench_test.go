package failover

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// BenchMessagesEnv names the environment variable that sets the backlog of
// BenchmarkConsumeRate; default 50,000.
const BenchMessagesEnv = "REPLAYGUARD_BENCH_MESSAGES"

// benchPayloadSize is the size of every benchmark message, in bytes.
const benchPayloadSize = 200

// BenchmarkConsumeRate compares `replayguard run`, with the durable
// embedded store, with a no-op consumer (paho's automatic acknowledgements,
// a counter) on the same broker configuration and feed of 200-byte
// messages, in two settings:
//
//   - live: the consumer is connected and the publisher (one, window 100)
//     publishes n messages; the rate runs from the first publish to the
//     last message consumed. This is what a running system sees; it is
//     bounded by what the broker and the publisher reach.
//   - backlog: n messages are queued in the consumer's session while it is
//     away, then it connects and drains them.
//
// Each side runs three times per setting, alternating, each on a fresh
// broker; the medians and their ratio are reported:
//
//	go test ./internal/failover -run '^$' -bench ConsumeRate -benchtime 1x
func BenchmarkConsumeRate(b *testing.B) {
	n := 50000
	if v := os.Getenv(BenchMessagesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("%s=%q: %v", BenchMessagesEnv, v, err)
		}
	}
	for b.Loop() {
		benchCompare(b, "live", n, benchNoopLive, benchRunLive)
		benchCompare(b, "backlog", n, benchNoop, benchRun)
	}
}

// benchCompare runs noop and run three times each, alternating, and
// reports the medians, their ratio and run's CPU time per message under
// the given setting's name.
func benchCompare(b *testing.B, setting string, n int,
	noopRate func(*testing.B, int) testbroker.Rate,
	runRate func(*testing.B, int) benchCost,
) {
	var noop, run, cpu []float64
	for round := range 3 {
		noop = append(noop, noopRate(b, n).PerSecond())
		c := runRate(b, n)
		run, cpu = append(run, c.Rate.PerSecond()), append(cpu, us(c.CPU))
		b.Logf("%s round %d: no-op %.0f msg/s, replayguard run %.0f msg/s (%.1f µs of CPU per message)",
			setting, round+1, noop[round], run[round], cpu[round])
	}
	mn, mr := median(noop), median(run)
	b.Logf("%s, %d messages of %d bytes: no-op %.0f msg/s, replayguard run %.0f msg/s, ratio %.2f",
		setting, n, benchPayloadSize, mn, mr, mr/mn)
	b.ReportMetric(mn, setting+"-noop-msg/s")
	b.ReportMetric(mr, setting+"-run-msg/s")
	b.ReportMetric(mr/mn, setting+"-ratio")
	b.ReportMetric(median(cpu), setting+"-run-cpu-µs/msg")
}

// benchPublisher publishes the route's messages padded to benchPayloadSize,
// 100 awaiting PUBACK at a time.
func benchPublisher(b *testing.B, url string) *testbroker.Publisher {
	return testbroker.NewPublisher(b, []string{url}, testbroker.PublisherOptions{
		Window:  100,
		Topic:   func(source string) string { return topicPrefix + source },
		Payload: benchPayload,
	})
}

func benchPayload(source string, seq int64) []byte {
	p := fmt.Appendf(nil, `{"source_id":%q,"sequence":%d,"boot_id":"boot-1","value":1,"pad":"`, source, seq)
	p = append(p, strings.Repeat("x", max(0, benchPayloadSize-len(p)-2))...)
	return append(p, `"}`...)
}

// benchNoop measures the no-op consumer on a broker of its own.
func benchNoop(b *testing.B, n int) testbroker.Rate {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	id := testbroker.UniqueClientID("rg-bench")
	testbroker.StartAutoAckConsumer(b, broker.URL(), id, topicPrefix+"#").Close()
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()
	var c *testbroker.AutoAckConsumer
	rate := testbroker.MeasureBacklog(b, pub, n, func() func() int64 {
		c = testbroker.StartAutoAckConsumer(b, broker.URL(), id, topicPrefix+"#")
		return c.Received
	})
	c.Close()
	return rate
}

// benchNoopLive measures the no-op consumer on a broker of its own while
// the feed is published.
func benchNoopLive(b *testing.B, n int) testbroker.Rate {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	c := testbroker.StartAutoAckConsumer(b, broker.URL(), testbroker.UniqueClientID("rg-bench"), topicPrefix+"#")
	defer c.Close()
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()
	return testbroker.MeasureLive(b, pub, n, c.Received)
}

// benchRunLive measures `replayguard run` on a broker of its own while the
// feed is published; the process is up and subscribed before the first
// publish. It also returns the CPU time spent per message while the feed
// was published and consumed (benchCost).
func benchRunLive(b *testing.B, n int) benchCost {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	d := startDaemon(b, newSetup(b, []string{broker.URL()}, true))
	d.WaitReady()
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()
	m := startMeter(d, broker)
	rate := testbroker.MeasureLive(b, pub, n, testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) }))
	return m.stop(rate)
}

// benchRun measures `replayguard run` on a broker of its own; the time
// includes the start of the process. It also returns the CPU time spent
// per message over that time, the process's start included (benchCost):
// unlike the rate, replayguard's hardly depends on what else the machine
// runs.
func benchRun(b *testing.B, n int) benchCost {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	s := newSetup(b, []string{broker.URL()}, true)
	d := startDaemon(b, s) // creates the session and its subscription
	d.WaitReady()
	d.Stop()
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()
	var m meter
	rate := testbroker.MeasureBacklog(b, pub, n, func() func() int64 {
		m = startMeter(d, broker)
		d.Start()
		return testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) })
	})
	return m.stop(rate)
}

// median is the middle of xs, or the mean of the two middle ones of an
// even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// BenchmarkRedundantFeeds compares `replayguard run` consuming one broker
// with `run` consuming two redundant paths (mqtt.feeds, two Mosquittos)
// that both carry every message, three rounds alternating, in two
// settings: live (the process is up and subscribed, and the producer
// publishes each message to every path, one publisher a path), and
// backlog (every path holds the messages, drained from a fresh start).
// It reports the rate of distinct messages (the twins' decisions done
// too) and the CPU time per distinct message.
//
//	go test ./internal/failover -run '^$' -bench RedundantFeeds -benchtime 1x
func BenchmarkRedundantFeeds(b *testing.B) {
	n := 50000
	if v := os.Getenv(BenchMessagesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("%s=%q: %v", BenchMessagesEnv, v, err)
		}
	}
	for b.Loop() {
		benchCompareFeeds(b, "live", n, benchRunLive, benchRunFeedsLive)
		benchCompareFeeds(b, "backlog", n, benchRun, benchRunFeeds)
	}
}

// benchCompareFeeds runs one path and two paths three times each,
// alternating, and reports the medians and their ratios under the given
// setting's name. Besides replayguard's CPU it reports what the brokers
// and this process (the publishers) spent per distinct message over the
// measured time, and how busy the machine was: on two cores shared by all
// of them, the rate ratio cannot pass the ratio of the machine's CPU per
// distinct message, and the "ceiling" is that ratio with replayguard
// costing on two paths what it costs on one (a twin for free).
func benchCompareFeeds(b *testing.B, setting string, n int, runOne, runTwo func(*testing.B, int) benchCost) {
	var one, two []benchCost
	for round := range 3 {
		one, two = append(one, runOne(b, n)), append(two, runTwo(b, n))
		b.Logf("%s round %d: one path %s; two paths %s", setting, round+1, one[round], two[round])
	}
	med := func(cs []benchCost, f func(benchCost) float64) float64 {
		xs := make([]float64, len(cs))
		for i, c := range cs {
			xs[i] = f(c)
		}
		return median(xs)
	}
	rate := func(c benchCost) float64 { return c.Rate.PerSecond() }
	rg := func(c benchCost) float64 { return us(c.CPU) }
	machine := func(c benchCost) float64 { return us(c.Machine) }
	r1, r2, c1, c2, m1, m2 := med(one, rate), med(two, rate), med(one, rg), med(two, rg), med(one, machine), med(two, machine)
	busy1 := med(one, func(c benchCost) float64 { return c.Busy })
	// With every core busy, two paths reach at most the rate of one path
	// times m1/busy1 over the machine's CPU per distinct message; the
	// ceiling takes replayguard's part of that at its one-path cost.
	ceiling := m1 / busy1 / (m2 - c2 + c1)
	b.Logf("%s, %d messages of %d bytes: two paths %.2f× the rate of one, %.2f× its CPU per distinct message; "+
		"the machine's CPU per distinct message %.1f → %.1f µs (one path %.0f%% busy): with every core busy and a twin "+
		"costing replayguard nothing, two paths would reach %.2f× the rate of one",
		setting, n, benchPayloadSize, r2/r1, c2/c1, m1, m2, 100*busy1, ceiling)
	b.ReportMetric(r1, setting+"-one-path-msg/s")
	b.ReportMetric(r2, setting+"-two-paths-distinct-msg/s")
	b.ReportMetric(r2/r1, setting+"-rate-ratio")
	b.ReportMetric(c2/c1, setting+"-cpu-ratio")
	b.ReportMetric(ceiling, setting+"-ceiling-rate-ratio")
}

// benchRunFeedsLive measures `replayguard run` on two paths, each a broker
// of its own, while the producer publishes the same n messages to both,
// one publisher a path, at once; the process is up and subscribed before
// the first publish. The time runs from the first publish until every
// delivery of both paths is decided (n applied and n duplicate); the CPU
// time over it is per distinct message.
func benchRunFeedsLive(b *testing.B, n int) benchCost {
	a, c := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{}), testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer a.Kill()
	defer c.Kill()
	d := startDaemon(b, feedsSetup(b, map[string][]string{"a": {a.URL()}, "b": {c.URL()}}, setupOptions{API: true}))
	waitFeedsReady(b, d)
	pubs := []*testbroker.Publisher{benchPublisher(b, a.URL()), benchPublisher(b, c.URL())}
	m := startMeter(d, a, c)
	begin := time.Now()
	var wg sync.WaitGroup
	for _, pub := range pubs {
		wg.Go(func() {
			if got := pub.Publish(context.Background(), "bench", n); got != n {
				b.Errorf("a path acknowledged %d of %d messages", got, n)
			}
		})
	}
	testbroker.WaitReceived(b, testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) }), int64(2*n), 2*time.Minute)
	rate := testbroker.Rate{Messages: int64(n), Elapsed: time.Since(begin)}
	c0 := m.stop(rate)
	wg.Wait()
	for _, pub := range pubs {
		pub.Close()
	}
	return c0
}

// benchRunFeeds measures `replayguard run` on two paths, each a broker of
// its own holding the same n messages as a backlog: the time runs from the
// start of the process until every delivery of both paths is decided (n
// applied and n duplicate); the CPU time is per distinct message.
func benchRunFeeds(b *testing.B, n int) benchCost {
	a, c := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{}), testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer a.Kill()
	defer c.Kill()
	s := feedsSetup(b, map[string][]string{"a": {a.URL()}, "b": {c.URL()}}, setupOptions{API: true})
	d := startDaemon(b, s) // creates both sessions and their subscriptions
	waitFeedsReady(b, d)   // /readyz is 200 once one path is
	d.Stop()
	for _, broker := range []*testbroker.Mosquitto{a, c} {
		pub := benchPublisher(b, broker.URL())
		if got := pub.Publish(context.Background(), "bench", n); got != n {
			b.Fatalf("%s acknowledged %d of %d backlog messages", broker.URL(), got, n)
		}
		pub.Close()
	}
	m := startMeter(d, a, c)
	begin := time.Now()
	d.Start()
	testbroker.WaitReceived(b, testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) }), int64(2*n), 2*time.Minute)
	return m.stop(testbroker.Rate{Messages: int64(n), Elapsed: time.Since(begin)})
}

// benchCost is one measured run of replayguard: its rate and, per message
// (per distinct message with two paths), the CPU time spent over the
// measured time by replayguard, by the brokers, by this process (the
// publishers) and by the whole machine, and the machine's busy share.
type benchCost struct {
	Rate                           testbroker.Rate
	CPU, Brokers, Harness, Machine time.Duration
	Busy                           float64 // of all the machine's cores, 0 to 1
}

func (c benchCost) String() string {
	return fmt.Sprintf("%.0f msg/s, CPU µs a message: replayguard %.1f, brokers %.1f, publishers %.1f, machine %.1f (%.0f%% busy)",
		c.Rate.PerSecond(), us(c.CPU), us(c.Brokers), us(c.Harness), us(c.Machine), 100*c.Busy)
}

// meter takes the CPU counters at the start of a measured time.
type meter struct {
	d       *daemon
	brokers []*testbroker.Mosquitto
	rg      float64 // replayguard's process_cpu_seconds_total; 0 when not running
	broker  time.Duration
	harness time.Duration
	machine [2]time.Duration // busy and total
}

// startMeter starts a measured time of d (running or not) and brokers.
func startMeter(d *daemon, brokers ...*testbroker.Mosquitto) meter {
	m := meter{d: d, brokers: brokers, harness: processCPU(), machine: machineCPU()}
	if d.running() {
		m.rg = d.Metrics()["process_cpu_seconds_total"]
	}
	m.broker = m.brokerCPU()
	return m
}

func (m meter) brokerCPU() (t time.Duration) {
	for _, br := range m.brokers {
		t += br.CPU()
	}
	return t
}

// stop ends the measured time, stops the daemon, and returns the cost per
// message of rate.
func (m meter) stop(rate testbroker.Rate) benchCost {
	broker, harness, machine := m.brokerCPU()-m.broker, processCPU()-m.harness, machineCPU()
	rg := m.d.Metrics()["process_cpu_seconds_total"] - m.rg
	m.d.Stop()
	n := time.Duration(rate.Messages)
	busy, total := machine[0]-m.machine[0], machine[1]-m.machine[1]
	c := benchCost{Rate: rate, CPU: time.Duration(rg*float64(time.Second)) / n, Brokers: broker / n, Harness: harness / n, Machine: busy / n}
	if total > 0 {
		c.Busy = float64(busy) / float64(total)
	}
	return c
}

// machineCPU returns the time all the machine's cores have been busy so
// far, and their whole time (/proc/stat, in jiffies of 10 ms); zeros when
// it cannot be read.
func machineCPU() [2]time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]time.Duration{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var busy, total time.Duration
	for i, f := range fields[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		total += time.Duration(v) * 10 * time.Millisecond
		if i != 3 && i != 4 { // idle, iowait
			busy += time.Duration(v) * 10 * time.Millisecond
		}
	}
	return [2]time.Duration{busy, total}
}

func us(d time.Duration) float64 { return d.Seconds() * 1e6 }
