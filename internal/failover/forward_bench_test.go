package failover

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// BenchRoundsEnv names the environment variable that sets how many rounds
// BenchmarkForwardRate runs each side of each setting; default 3.
const BenchRoundsEnv = "REPLAYGUARD_BENCH_ROUNDS"

// BenchFeedEnv names the environment variable that limits
// BenchmarkForwardRate to one setting, live or backlog; default both.
const BenchFeedEnv = "REPLAYGUARD_BENCH_FEED"

// BenchDownstreamEnv names the environment variable that, set to 0, runs
// BenchmarkForwardRate without a downstream consumer: the forwarded
// copies count once the broker acknowledged them (and drops them, as
// nobody subscribes).
const BenchDownstreamEnv = "REPLAYGUARD_BENCH_DOWNSTREAM"

// BenchOutputEnv names the environment variable that picks the output
// BenchmarkForwardRate forwards to: mqtt (the default), webhook (a
// receiver in this process that answers every POST 204) or nats (a
// nats-server of its own beside the broker, its JetStream stream taking
// clean.>, the copies counted in the stream).
const BenchOutputEnv = "REPLAYGUARD_BENCH_OUTPUT"

// BenchmarkForwardRate compares `replayguard run` (durable embedded store)
// without a forward effect and with one forwarding every applied message
// to the broker it consumes from (the default outputs.mqtt: the
// consumer's own brokers), where a downstream auto-acking consumer (paho)
// takes the clean stream: the broker carries the feed in, the forwarded
// copies in, and both out. Everything runs on this machine's cores, so the
// figures say what the whole costs; the CPU time of each process per
// message says who pays. REPLAYGUARD_BENCH_DOWNSTREAM=0 leaves the
// downstream consumer out. The feed and the settings are BenchmarkConsumeRate's
// (live: published while consumed; backlog: queued, then drained), on a
// fresh broker each time, the two sides alternating.
//
// Without forward the rate runs until every message is decided. With it,
// "forward" runs until every message is decided and its copy has reached
// the downstream consumer: the rate at which the clean stream is
// delivered; "decided" is when the last was decided, the rate that
// upstream sees. The ratio is forward's over the rate without:
//
//	go test ./internal/failover -run '^$' -bench ForwardRate -benchtime 1x
func BenchmarkForwardRate(b *testing.B) {
	n, rounds := 50000, 3
	if v := os.Getenv(BenchMessagesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("%s=%q: %v", BenchMessagesEnv, v, err)
		}
	}
	if v := os.Getenv(BenchRoundsEnv); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			b.Fatalf("%s=%q: not a positive number", BenchRoundsEnv, v)
		}
	}
	for b.Loop() {
		for _, live := range []bool{true, false} {
			if feed := os.Getenv(BenchFeedEnv); feed == "" || (feed == "live") == live {
				benchForwardCompare(b, live, n, rounds)
			}
		}
	}
}

// forwardRun is one measured run of `replayguard run`.
type forwardRun struct {
	Decided   testbroker.Rate // until the last message was decided
	Delivered testbroker.Rate // until the last copy reached downstream; Decided without forward
	// CPU time per message over the measurement: of replayguard (its
	// start included in a backlog drain), of the broker, and of this
	// process (the publisher and the downstream consumer); and the time
	// the whole machine's cores were busy per message, and its busy share.
	CPU, BrokerCPU, HarnessCPU, MachineCPU time.Duration
	Busy                                   float64
}

func benchForwardCompare(b *testing.B, live bool, n, rounds int) {
	setting := "backlog"
	if live {
		setting = "live"
	}
	var plain, fwd, decided, ratio, cpuPlain, cpuFwd []float64
	var brokerPlain, brokerFwd, harnessPlain, harnessFwd, machinePlain, machineFwd, busyPlain []float64
	for round := range rounds {
		sides := []bool{false, true}
		if round%2 == 1 {
			sides = []bool{true, false}
		}
		for _, on := range sides {
			r := benchForwardRun(b, live, on, n)
			if on {
				fwd, decided = append(fwd, r.Delivered.PerSecond()), append(decided, r.Decided.PerSecond())
				cpuFwd, brokerFwd, harnessFwd = append(cpuFwd, us(r.CPU)), append(brokerFwd, us(r.BrokerCPU)), append(harnessFwd, us(r.HarnessCPU))
				machineFwd = append(machineFwd, us(r.MachineCPU))
			} else {
				plain, cpuPlain = append(plain, r.Delivered.PerSecond()), append(cpuPlain, us(r.CPU))
				brokerPlain, harnessPlain = append(brokerPlain, us(r.BrokerCPU)), append(harnessPlain, us(r.HarnessCPU))
				machinePlain, busyPlain = append(machinePlain, us(r.MachineCPU)), append(busyPlain, r.Busy)
			}
		}
		ratio = append(ratio, fwd[round]/plain[round])
		b.Logf("%s round %d: without forward %.0f msg/s; with forward %.0f msg/s delivered downstream, %.0f msg/s decided; ratio %.2f; CPU µs/msg replayguard %.1f → %.1f, broker %.1f → %.1f, publisher and downstream %.1f → %.1f",
			setting, round+1, plain[round], fwd[round], decided[round], ratio[round],
			cpuPlain[round], cpuFwd[round], brokerPlain[round], brokerFwd[round], harnessPlain[round], harnessFwd[round])
	}
	b.Logf("%s, %d messages of %d bytes, %d rounds: without forward %s msg/s, with forward %s msg/s delivered (%s decided), ratio %s; CPU µs/msg replayguard %s → %s, broker %s → %s, publisher and downstream %s → %s",
		setting, n, benchPayloadSize, rounds, spread(plain, "%.0f"), spread(fwd, "%.0f"), spread(decided, "%.0f"),
		spread(ratio, "%.2f"), spread(cpuPlain, "%.1f"), spread(cpuFwd, "%.1f"), spread(brokerPlain, "%.1f"), spread(brokerFwd, "%.1f"),
		spread(harnessPlain, "%.1f"), spread(harnessFwd, "%.1f"))
	// Every process here shares the machine's cores: with all of them
	// busy, forwarding reaches at most the rate without it times the
	// machine's CPU per message without it (over its busy share) over the
	// machine's CPU per message with it; the ceiling counts replayguard's
	// part at its cost without forwarding, as if forwarding cost it nothing.
	ceiling := median(machinePlain) / median(busyPlain) / (median(machineFwd) - median(cpuFwd) + median(cpuPlain))
	b.Logf("%s: the machine's CPU per message %s → %s µs (%.0f%% busy without forward): with every core busy and forwarding costing replayguard nothing, the ratio would reach %.2f",
		setting, spread(machinePlain, "%.1f"), spread(machineFwd, "%.1f"), 100*median(busyPlain), ceiling)
	b.ReportMetric(ceiling, setting+"-ceiling-ratio")
	b.ReportMetric(median(plain), setting+"-plain-msg/s")
	b.ReportMetric(median(fwd), setting+"-forward-msg/s")
	b.ReportMetric(median(decided), setting+"-forward-decided-msg/s")
	b.ReportMetric(median(ratio), setting+"-ratio")
	b.ReportMetric(median(cpuPlain), setting+"-plain-cpu-µs/msg")
	b.ReportMetric(median(cpuFwd), setting+"-forward-cpu-µs/msg")
	b.ReportMetric(median(brokerPlain), setting+"-plain-broker-cpu-µs/msg")
	b.ReportMetric(median(brokerFwd), setting+"-forward-broker-cpu-µs/msg")
}

// spread renders the median and the range of xs: "m (lo–hi)".
func spread(xs []float64, format string) string {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", median(xs), lo, hi)
}

// benchForwardRun measures `replayguard run` on a broker of its own, with
// or without the forward effect, on a live feed or a backlog.
func benchForwardRun(b *testing.B, live, forward bool, n int) forwardRun {
	broker := testbroker.StartMosquitto(b, testbroker.MosquittoOptions{})
	defer broker.Kill()
	o := setupOptions{API: true}
	var down *benchDownstream
	if forward {
		down = startBenchDownstream(b, broker, &o)
		defer down.close()
	}
	d := startDaemon(b, newSetupWith(b, []string{broker.URL()}, o)) // creates the session and its subscription
	d.WaitReady()
	if !live {
		d.Stop()
	}
	pub := benchPublisher(b, broker.URL())
	defer pub.Close()

	var decidedAt time.Time
	position := testbroker.Throttle(20*time.Millisecond, func() int64 { return int64(d.Position()) })
	if down != nil && down.received == nil {
		position = testbroker.Throttle(20*time.Millisecond, func() int64 {
			m := d.Metrics()
			if p := int64(m["replayguard_decisions_total"]); p < int64(n) {
				return p
			}
			if decidedAt.IsZero() {
				decidedAt = time.Now()
			}
			return int64(m["replayguard_forwarded_total/delivered"])
		})
	}
	received := func() int64 {
		p := position()
		if decidedAt.IsZero() && p >= int64(n) {
			decidedAt = time.Now()
		}
		if down != nil && down.received != nil {
			p = min(p, down.received())
		}
		return p
	}
	brokerCPU := broker.CPU
	if down != nil && down.cpu != nil {
		brokerCPU = func() time.Duration { return broker.CPU() + down.cpu() }
	}
	var began time.Time
	var rate testbroker.Rate
	var rg0 float64
	var broker0, harness0 time.Duration
	var machine0 [2]time.Duration
	if live {
		rg0, broker0, harness0, machine0 = d.Metrics()["process_cpu_seconds_total"], brokerCPU(), processCPU(), machineCPU()
		began = time.Now()
		rate = testbroker.MeasureLive(b, pub, n, received)
	} else {
		rate = testbroker.MeasureBacklog(b, pub, n, func() func() int64 {
			broker0, harness0, machine0 = brokerCPU(), processCPU(), machineCPU()
			began = time.Now()
			d.Start()
			return received
		})
	}
	perMsg := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	machine := machineCPU()
	r := forwardRun{
		Decided:    testbroker.Rate{Messages: int64(n), Elapsed: decidedAt.Sub(began)},
		Delivered:  rate,
		CPU:        perMsg(time.Duration((d.Metrics()["process_cpu_seconds_total"] - rg0) * float64(time.Second))),
		BrokerCPU:  perMsg(brokerCPU() - broker0),
		HarnessCPU: perMsg(processCPU() - harness0),
	}
	r.MachineCPU = perMsg(machine[0] - machine0[0])
	if total := machine[1] - machine0[1]; total > 0 {
		r.Busy = float64(machine[0]-machine0[0]) / float64(total)
	}
	d.Stop()
	return r
}

// benchDownstream takes one run's clean stream.
type benchDownstream struct {
	// received counts the copies it holds; nil when nothing takes them
	// (the MQTT output with BenchDownstreamEnv=0): a copy then counts once
	// the output has it acknowledged.
	received func() int64
	cpu      func() time.Duration // of a server of its own beside the broker; nil: none
	close    func()
}

// startBenchDownstream starts what takes the clean stream of the output
// BenchOutputEnv names, and sets o to forward every applied message to it.
func startBenchDownstream(b *testing.B, broker *testbroker.Mosquitto, o *setupOptions) *benchDownstream {
	switch out := os.Getenv(BenchOutputEnv); out {
	case "", "mqtt":
		o.Downstream = broker.URL()
		if os.Getenv(BenchDownstreamEnv) == "0" {
			return &benchDownstream{close: func() {}}
		}
		c := testbroker.StartAutoAckConsumer(b, broker.URL(), testbroker.UniqueClientID("rg-bench-down"), cleanPrefix+"#")
		return &benchDownstream{received: c.Received, close: c.Close}
	case "webhook":
		// A receiver that takes every POST: the output sends one at a
		// time and waits for each answer.
		var posts atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			posts.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		o.Forward, o.Outputs = fmt.Sprintf("{webhook: %q}", srv.URL+"/hook"), ""
		return &benchDownstream{received: posts.Load, close: srv.Close}
	case "nats":
		ns := testbroker.StartNATS(b, testbroker.NATSOptions{})
		ns.CreateStream("CLEAN", "clean.>")
		nc, err := nats.Connect(ns.URL())
		if err != nil {
			b.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		stored := func() int64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := js.Stream(ctx, "CLEAN")
			if err != nil {
				b.Errorf("stream CLEAN: %v", err)
				return 0
			}
			return int64(st.CachedInfo().State.Msgs)
		}
		o.Forward, o.Outputs = `{nats: "clean.{source_id}"}`, fmt.Sprintf("outputs: {nats: {url: %q}}\n", ns.URL())
		return &benchDownstream{received: stored, cpu: ns.CPU, close: func() { nc.Close(); ns.Kill() }}
	default:
		b.Fatalf("%s=%q: mqtt, webhook or nats", BenchOutputEnv, out)
		return nil
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
