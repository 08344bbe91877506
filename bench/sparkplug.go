package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The Sparkplug rows run like the MQTT ones, each side on a fresh
// Mosquitto with one publisher at QoS 1, but on the Sparkplug feed
// (spfeed.go): each edge's NBIRTH first, one at a time, then its data with
// 100 publishes awaiting PUBACK. The births go first because data the
// broker delivered ahead of its birth certificate cannot be read (its
// aliases are unknown) and replayguard rightly holds it; a publisher's
// window reorders only the data among themselves, by far less than half
// the seq ring.

// spRoute is replayguard's configuration: a sparkplug route adding up each
// edge's Energy and keeping its last Temperature. %q: the embedded store's
// path, the broker, the client id, the HTTP listen address.
const spRoute = `store: {kind: embedded, path: %q}
routes:
  - name: plant
    kind: sparkplug
    topic: ` + spTopicRoot + `
    effects:
      - entity: "meter/{topic[3]}"
        add: {kwh: metrics.Energy}
        set: {temperature: metrics.Temperature}
mqtt: {brokers: [%q], client_id: %q, session_expiry: 1h}
http: {listen: %q}
`

// spWindow is how many of the feed's data messages may await their PUBACK.
const spWindow = 100

// spPublish publishes the feed: the births one at a time, each
// acknowledged before the next message, then the rest with spWindow
// awaiting PUBACK.
func spPublish(pub *testbroker.Publisher, f spFeed) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, m := range f.msgs[:f.edges] {
		if !pub.Send(ctx, m.Topic, m.Payload) {
			return fmt.Errorf("the broker did not acknowledge %s", m.Topic)
		}
	}
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		sem    = make(chan struct{}, spWindow)
	)
	for i := f.edges; i < len(f.msgs); i++ {
		m := f.msgs[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if !pub.Send(ctx, m.Topic, m.Payload) {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("the broker did not acknowledge %d of %d publishes", n, len(f.msgs))
	}
	return nil
}

// spMeasureLive publishes the feed while the consumer, already subscribed,
// takes it; the timer runs from the first publish until received() has
// grown by the feed's length.
func spMeasureLive(h *harness, pub *testbroker.Publisher, f spFeed, received func() int64) time.Duration {
	base := received()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- spPublish(pub, f) }()
	testbroker.WaitReceived(h, func() int64 { return received() - base }, int64(len(f.msgs)), 2*time.Minute)
	took := time.Since(start)
	if err := <-errc; err != nil {
		h.Fatal(err)
	}
	return took
}

// spMeasureBacklog publishes the feed while the consumer is stopped (its
// session holds the subscription), then times start until received()
// reaches the feed's length.
func spMeasureBacklog(h *harness, pub *testbroker.Publisher, f spFeed, start func() (received func() int64)) time.Duration {
	if err := spPublish(pub, f); err != nil {
		h.Fatal(err)
	}
	begin := time.Now()
	received := start()
	testbroker.WaitReceived(h, received, int64(len(f.msgs)), 2*time.Minute)
	return time.Since(begin)
}

// settled waits until broker has read nothing for half a second (at most
// 30 s): it has then taken every PUBACK the consumer sent, and the CPU time
// read next includes its handling of them. Mosquitto 2.0 sends a backlog
// far past a consumer's receive maximum and may read the PUBACKs after the
// last delivery arrived; counted only to that delivery, a consumer that
// acknowledges at once (the no-op) had most of its PUBACKs handled after
// the count, while replayguard, whose acknowledgements follow its commits,
// had most of its own handled within it.
func settled(broker *testbroker.Mosquitto) {
	last, quiet := broker.Reads(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := broker.Reads(); n != last {
			last, quiet = n, time.Now()
		} else if time.Since(quiet) >= 500*time.Millisecond {
			return
		}
	}
}

// spNoop measures paho's auto-acking client doing nothing but count, on
// the Sparkplug feed. CPU time: the harness's process (publisher and
// consumer) plus Mosquitto's.
func spNoop(h *harness, f spFeed, backlog bool) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	id := testbroker.UniqueClientID("rg-peers-spnoop")
	pub := testbroker.NewPublisher(h, []string{broker.URL()}, testbroker.PublisherOptions{})
	defer pub.Close()
	var c *testbroker.AutoAckConsumer
	var took time.Duration
	cpu := cpuTime(syscall.RUSAGE_SELF) + broker.CPU()
	if backlog {
		testbroker.StartAutoAckConsumer(h, broker.URL(), id, spTopicRoot).Close() // the session and its subscription
		took = spMeasureBacklog(h, pub, f, func() func() int64 {
			cpu = cpuTime(syscall.RUSAGE_SELF) + broker.CPU()
			c = testbroker.StartAutoAckConsumer(h, broker.URL(), id, spTopicRoot)
			return c.Received
		})
	} else {
		c = testbroker.StartAutoAckConsumer(h, broker.URL(), id, spTopicRoot)
		took = spMeasureLive(h, pub, f, c.Received)
	}
	settled(broker)
	cpu = cpuTime(syscall.RUSAGE_SELF) + broker.CPU() - cpu
	c.Close()
	n := len(f.msgs)
	return result{rate: float64(n) / took.Seconds(), cpu: cpu.Seconds() / float64(n), check: check{messages: n, kept: int(c.Received())}}
}

// spReplayguard measures `replayguard run` (app.Run, in this process, on a
// durable embedded store) with the sparkplug route. Its check: it applied
// exactly the feed's distinct messages, and each edge's kWh is their exact
// sum (a wrong sum fails the round).
func spReplayguard(h *harness, f spFeed, backlog bool) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	d := newSpDaemon(h, broker.URL())
	d.start(h)
	d.waitReady(h)
	pub := testbroker.NewPublisher(h, []string{broker.URL()}, testbroker.PublisherOptions{})
	defer pub.Close()
	position := testbroker.Throttle(20*time.Millisecond, func() int64 { return d.position(h) })
	var took time.Duration
	cpu := cpuTime(syscall.RUSAGE_SELF) + broker.CPU()
	if backlog {
		d.stop(h)
		took = spMeasureBacklog(h, pub, f, func() func() int64 {
			cpu = cpuTime(syscall.RUSAGE_SELF) + broker.CPU()
			d.start(h)
			return position
		})
	} else {
		took = spMeasureLive(h, pub, f, position)
	}
	settled(broker)
	cpu = cpuTime(syscall.RUSAGE_SELF) + broker.CPU() - cpu
	applied := d.applied(h)
	checkEnergy(h, d, f)
	d.stop(h)
	n := len(f.msgs)
	return result{rate: float64(n) / took.Seconds(), cpu: cpu.Seconds() / float64(n), check: countCheck(n, f.unique(), applied)}
}

func newSpDaemon(h *harness, brokerURL string) *daemon {
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(h))
	text := fmt.Sprintf(spRoute, filepath.Join(h.TempDir(), "data"), brokerURL, testbroker.UniqueClientID("rg-peers-sp"), listen)
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

// checkEnergy fails the round unless every edge's kwh in replayguard's
// state is the exact sum of its distinct messages' Energy.
func checkEnergy(h *harness, d *daemon, f spFeed) {
	resp := d.get(h, "/api/v1/state")
	defer resp.Body.Close()
	var state map[string]map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&state); err != nil {
		h.Fatal(err)
	}
	for entity, want := range f.energy() {
		got, ok := new(big.Rat).SetString(string(state[entity]["kwh"]))
		if !ok || got.Cmp(want) != 0 {
			h.Fatalf("%s: kwh %s, want exactly %s", entity, state[entity]["kwh"], want.FloatString(2))
		}
	}
}

// spRow is the Sparkplug row on feed f, live or backlog.
func spRow(f spFeed, backlog bool) row {
	r := row{id: "sparkplug", what: "Sparkplug B end to end, live feed", goal: 0.8}
	if backlog {
		r.id, r.what = "sparkplug-backlog", "Sparkplug B, backlog drain"
	}
	r.sides = []side{
		{short: "replayguard", name: "`replayguard run`, a sparkplug route adding a metric (embedded store)",
			run: func(h *harness) result { return spReplayguard(h, f, backlog) }},
		{short: "no-op paho", name: "no-op auto-acking paho consumer", run: func(h *harness) result { return spNoop(h, f, backlog) }},
	}
	return r
}

// spFeedInfo describes the Sparkplug feed for the report.
func spFeedInfo(f spFeed) string {
	size := 0
	for i := range f.msgs {
		size += len(f.msgs[i].Payload)
	}
	return fmt.Sprintf("The Sparkplug rows publish %s deliveries of %s distinct Sparkplug B messages from %d edge nodes "+
		"(an NBIRTH of 8 metrics each, then NDATA of the 8 by alias, seq wrapping past 255 about %d times an edge; "+
		"%d-byte payloads on average, %s replays in failover bursts)",
		count(len(f.msgs)), count(f.unique()), f.edges, f.unique()/f.edges/256, size/len(f.msgs), count(len(f.msgs)-f.unique()))
}

// spMethod is how the Sparkplug rows run, for the report.
const spMethod = `- Sparkplug B: each side on a fresh Mosquitto as in the MQTT rows, one publisher at QoS 1 sending
  each edge's NBIRTH alone (acknowledged before anything else: data delivered ahead of its birth
  certificate cannot be read and is held), then the data with 100 awaiting PUBACK; live and backlog
  timed as in the MQTT rows. replayguard is ` + "`app.Run`" + ` with one route of ` + "`kind: sparkplug`" + `
  (` + "`add: {kwh: metrics.Energy}`, `set: {temperature: metrics.Temperature}`" + ` per edge), durable embedded
  store; it must apply exactly the distinct messages (births included) and each edge's kwh in its
  state must be the exact sum of its distinct messages' Energy (a wrong sum fails the round). The
  no-op is the MQTT rows' paho consumer. CPU time per delivery: the harness's process (publisher
  and consumer; in a backlog drain the consumer only, the publishing done before) plus Mosquitto's,
  both counted until Mosquitto has read every PUBACK (no read system call for 0.5 s after the last
  delivery): Mosquitto 2.0 sends a backlog past the consumer's receive maximum and may read the
  acknowledgements after the last delivery arrived, most of them for a consumer that acknowledges
  at once, few for one that acknowledges after its commits.
`
