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
	runRate func(*testing.B, int) (testbroker.Rate, time.Duration),
) {
	var noop, run, cpu []float64
	for round := range 3 {
		noop = append(noop, noopRate(b, n).PerSecond())
		rate, perMsg := runRate(b, n)
		run, cpu = append(run, rate.PerSecond()), append(cpu, perMsg.Seconds()*1e6)
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
// publish. It also returns the CPU time the process spent per message,
// start included.
func benchRunLive(b *testing.B, n int) (testbroker.Rate, time.Duration) {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	d := startDaemon(b, newSetup(b, []string{broker.URL()}, true))
	d.WaitReady()
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()
	rate := testbroker.MeasureLive(b, pub, n, testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) }))
	cpu := d.Metrics()["process_cpu_seconds_total"]
	d.Stop()
	return rate, time.Duration(cpu / float64(n) * float64(time.Second))
}

// benchRun measures `replayguard run` on a broker of its own; the time
// includes the start of the process. It also returns the CPU time the
// process spent per message, start included: unlike the rate, it hardly
// depends on what else the machine runs.
func benchRun(b *testing.B, n int) (testbroker.Rate, time.Duration) {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	s := newSetup(b, []string{broker.URL()}, true)
	d := startDaemon(b, s) // creates the session and its subscription
	d.WaitReady()
	d.Stop()
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()
	rate := testbroker.MeasureBacklog(b, pub, n, func() func() int64 {
		d.Start()
		return testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) })
	})
	cpu := d.Metrics()["process_cpu_seconds_total"]
	d.Stop()
	return rate, time.Duration(cpu / float64(n) * float64(time.Second))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
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
// setting's name.
func benchCompareFeeds(b *testing.B, setting string, n int, runOne, runTwo func(*testing.B, int) (testbroker.Rate, time.Duration)) {
	var one, two, cpuOne, cpuTwo []float64
	for round := range 3 {
		r1, c1 := runOne(b, n)
		r2, c2 := runTwo(b, n)
		one, two = append(one, r1.PerSecond()), append(two, r2.PerSecond())
		cpuOne, cpuTwo = append(cpuOne, c1.Seconds()*1e6), append(cpuTwo, c2.Seconds()*1e6)
		b.Logf("%s round %d: one path %.0f msg/s (%.1f µs CPU/msg), two paths %.0f distinct msg/s (%.1f µs CPU per distinct msg)",
			setting, round+1, one[round], cpuOne[round], two[round], cpuTwo[round])
	}
	b.Logf("%s, %d messages of %d bytes: two paths %.2f× the rate of one, %.2f× its CPU per distinct message",
		setting, n, benchPayloadSize, median(two)/median(one), median(cpuTwo)/median(cpuOne))
	b.ReportMetric(median(one), setting+"-one-path-msg/s")
	b.ReportMetric(median(two), setting+"-two-paths-distinct-msg/s")
	b.ReportMetric(median(two)/median(one), setting+"-rate-ratio")
	b.ReportMetric(median(cpuTwo)/median(cpuOne), setting+"-cpu-ratio")
}

// benchRunFeedsLive measures `replayguard run` on two paths, each a broker
// of its own, while the producer publishes the same n messages to both,
// one publisher a path, at once; the process is up and subscribed before
// the first publish. The time runs from the first publish until every
// delivery of both paths is decided (n applied and n duplicate); the CPU
// time, start included, is per distinct message.
func benchRunFeedsLive(b *testing.B, n int) (testbroker.Rate, time.Duration) {
	a, c := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{}), testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer a.Kill()
	defer c.Kill()
	d := startDaemon(b, feedsSetup(b, map[string][]string{"a": {a.URL()}, "b": {c.URL()}}, setupOptions{API: true}))
	waitFeedsReady(b, d)
	pubs := []*testbroker.Publisher{benchPublisher(b, a.URL()), benchPublisher(b, c.URL())}
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
	wg.Wait()
	for _, pub := range pubs {
		pub.Close()
	}
	cpu := d.Metrics()["process_cpu_seconds_total"]
	d.Stop()
	return rate, time.Duration(cpu / float64(n) * float64(time.Second))
}

// benchRunFeeds measures `replayguard run` on two paths, each a broker of
// its own holding the same n messages as a backlog: the time runs from the
// start of the process until every delivery of both paths is decided (n
// applied and n duplicate); the CPU time is per distinct message.
func benchRunFeeds(b *testing.B, n int) (testbroker.Rate, time.Duration) {
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
	begin := time.Now()
	d.Start()
	testbroker.WaitReceived(b, testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) }), int64(2*n), 2*time.Minute)
	rate := testbroker.Rate{Messages: int64(n), Elapsed: time.Since(begin)}
	cpu := d.Metrics()["process_cpu_seconds_total"]
	d.Stop()
	return rate, time.Duration(cpu / float64(n) * float64(time.Second))
}
