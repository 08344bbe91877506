package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The MQTT rows run on a fresh Mosquitto each (testbroker's configuration:
// interval persistence, unlimited queue, 100 in flight) with one publisher
// keeping 100 publishes awaiting PUBACK, the way BenchmarkConsumeRate in
// internal/failover does, but on the feed's messages: deliveries 1…n of
// the generated feed, replays included, in feed order.

const mqttTopic = "incidents/county-fire/bench"

func feedPublisher(h *harness, url string, feed []benchfeed.Message) *testbroker.Publisher {
	return testbroker.NewPublisher(h, []string{url}, testbroker.PublisherOptions{
		Window:  100,
		Topic:   func(string) string { return mqttTopic },
		Payload: func(_ string, seq int64) []byte { return feed[seq-1].Payload },
	})
}

// mqttNoop measures paho's auto-acking client doing nothing but count.
func mqttNoop(h *harness, feed []benchfeed.Message, backlog bool) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	id := testbroker.UniqueClientID("rg-peers-noop")
	var rate testbroker.Rate
	var c *testbroker.AutoAckConsumer
	if backlog {
		testbroker.StartAutoAckConsumer(h, broker.URL(), id, "incidents/#").Close() // the session and its subscription
		pub := feedPublisher(h, broker.URL(), feed)
		defer pub.Close()
		rate = testbroker.MeasureBacklog(h, pub, len(feed), func() func() int64 {
			c = testbroker.StartAutoAckConsumer(h, broker.URL(), id, "incidents/#")
			return c.Received
		})
	} else {
		c = testbroker.StartAutoAckConsumer(h, broker.URL(), id, "incidents/#")
		pub := feedPublisher(h, broker.URL(), feed)
		defer pub.Close()
		rate = testbroker.MeasureLive(h, pub, len(feed), c.Received)
	}
	c.Close()
	return result{rate: rate.PerSecond(), check: check{messages: len(feed), kept: int(c.Received())}}
}

// mqttReplayguard measures `replayguard run` (app.Run, in this process) on
// a durable embedded store. Backlog: the session is created first, the
// feed queued while it is stopped, and the timer includes its start.
func mqttReplayguard(h *harness, feed []benchfeed.Message, backlog bool) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	d := newDaemon(h, broker.URL(), "")
	d.start(h)
	d.waitReady(h)
	pub := feedPublisher(h, broker.URL(), feed)
	defer pub.Close()
	position := testbroker.Throttle(20*time.Millisecond, func() int64 { return d.position(h) })
	var rate testbroker.Rate
	if backlog {
		d.stop(h)
		rate = testbroker.MeasureBacklog(h, pub, len(feed), func() func() int64 {
			d.start(h)
			return position
		})
	} else {
		rate = testbroker.MeasureLive(h, pub, len(feed), position)
	}
	applied := d.applied(h)
	d.stop(h)
	return result{rate: rate.PerSecond(), check: countCheck(len(feed), benchfeed.Unique(feed), applied)}
}

// daemon is app.Run, what `replayguard run` runs, with its HTTP API on a
// free port for the harness to read its audit position and metrics.
type daemon struct {
	cfg    *config.Config
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

// newDaemon configures app.Run on brokerURL; protocol is mqtt.protocol
// (empty: the default).
func newDaemon(h *harness, brokerURL, protocol string) *daemon {
	if protocol == "" {
		protocol = config.DefaultMQTTProtocol
	}
	return newDaemonMQTT(h, fmt.Sprintf("{brokers: [%q], protocol: %q, client_id: %q, session_expiry: 1h}",
		brokerURL, protocol, testbroker.UniqueClientID("rg-peers")))
}

// newDaemonMQTT configures app.Run with mqtt, a YAML flow mapping.
func newDaemonMQTT(h *harness, mqtt string) *daemon {
	return newDaemonConfig(h, fmt.Sprintf(benchfeed.Route, filepath.Join(h.TempDir(), "data")), mqtt)
}

// newDaemonConfig configures app.Run with the store and routes of
// storeRoutes (YAML) and mqtt, a YAML flow mapping.
func newDaemonConfig(h *harness, storeRoutes, mqtt string) *daemon {
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(h))
	text := storeRoutes + fmt.Sprintf("mqtt: %s\nhttp: {listen: %q}\n", mqtt, listen)
	cfg, err := config.Parse([]byte(text), "(bench)", nil)
	if err != nil {
		h.Fatalf("configuration:\n%s\n%v", text, err)
	}
	d := &daemon{cfg: cfg, client: &http.Client{Timeout: 5 * time.Second}}
	h.Cleanup(func() {
		if d.cancel != nil {
			d.cancel()
			<-d.done
		}
		d.client.CloseIdleConnections()
	})
	return d
}

// start runs app.Run and waits until it answers HTTP.
func (d *daemon) start(h *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan error, 1)
	// The daemon's goroutines, and every one they start, carry the label
	// side=replayguard: -cpuprofile then tells its work from the harness's
	// (go tool pprof -tagfocus side=replayguard).
	go pprof.Do(ctx, pprof.Labels("side", "replayguard"), func(ctx context.Context) {
		d.done <- app.Run(ctx, d.cfg, slog.New(slog.DiscardHandler), app.Build{Version: "bench"})
	})
	d.wait(h, "/healthz", false)
}

func (d *daemon) waitReady(h *harness) { d.wait(h, "/readyz", false) }

// waitFeedsReady waits until every path of mqtt.feeds is ready: /readyz is
// 200 once one is, and a path not yet subscribed when the daemon stops
// would lose what is published to it meanwhile.
func (d *daemon) waitFeedsReady(h *harness) { d.wait(h, "/readyz", true) }

// wait waits until path answers 200 and, with noWarning, its JSON body
// carries no warning.
func (d *daemon) wait(h *harness, path string, noWarning bool) {
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-d.done:
			d.cancel = nil
			h.Fatalf("replayguard run ended at start: %v", err)
		default:
		}
		if resp, err := d.client.Get(d.url(path)); err == nil {
			var body struct {
				Warning string `json:"warning"`
			}
			if noWarning {
				_ = json.NewDecoder(resp.Body).Decode(&body)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && body.Warning == "" {
				return
			}
		}
		if time.Now().After(deadline) {
			h.Fatalf("replayguard run: no %s within 15 s", path)
		}
	}
}

// stop cancels app.Run, which drains, commits and acknowledges what it
// has in hand before it returns.
func (d *daemon) stop(h *harness) {
	d.cancel()
	d.cancel = nil
	select {
	case err := <-d.done:
		if err != nil {
			h.Fatalf("replayguard run: %v", err)
		}
	case <-time.After(30 * time.Second):
		h.Fatal("replayguard run did not stop within 30 s")
	}
}

func (d *daemon) url(path string) string { return "http://" + d.cfg.HTTP.Listen + path }

func (d *daemon) get(h *harness, path string) *http.Response {
	resp, err := d.client.Get(d.url(path))
	if err != nil {
		h.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		h.Fatalf("GET %s: %s", path, resp.Status)
	}
	return resp
}

// position is the audit head: one record per delivery decided.
func (d *daemon) position(h *harness) int64 {
	resp := d.get(h, "/api/v1/stats")
	defer resp.Body.Close()
	var st struct {
		Position int64 `json:"position"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		h.Fatal(err)
	}
	return st.Position
}

// applied is replayguard_decisions_total summed over the outcomes that
// apply the update (applied, and applied late after a gap).
func (d *daemon) applied(h *harness) int {
	resp := d.get(h, "/metrics")
	defer resp.Body.Close()
	n := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		labels, ok := strings.CutPrefix(line, "replayguard_decisions_total{")
		if !ok || !effective(labels) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				h.Fatalf("metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return int(n)
}

// effective reports whether a sample's labels name an outcome that applies
// the update.
func effective(labels string) bool {
	_, rest, ok := strings.Cut(labels, `outcome="`)
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(rest, `"`)
	o, ok := engine.ParseOutcome(name)
	return ok && o.Effective()
}
