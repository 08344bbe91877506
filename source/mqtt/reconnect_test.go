package mqtt_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/mqtt"
)

// TestReconnectAfterFailovers fails the broker ten times under one Run of
// one consumer, with the default reconnect backoff and a publisher feeding
// throughout. Each new broker starts from a snapshot of the last one's
// mosquitto.db taken before the consumer's latest deliveries and acks, so
// it replays some of them and loses what it acknowledged to the publisher
// after the snapshot. Every other failover promotes a standby already
// running on the other port; the rest restart the broker in place from the
// snapshot. The consumer must be on every new broker within the bound
// below, connect once to each, and commit each delivery once per
// connection.
func TestReconnectAfterFailovers(t *testing.T) {
	const failovers = 10
	ports := [2]int{testbroker.FreePort(t), testbroker.FreePort(t)}
	for ports[1] == ports[0] {
		ports[1] = testbroker.FreePort(t)
	}
	urls := []string{"tcp://127.0.0.1:" + itoa(ports[0]), "tcp://127.0.0.1:" + itoa(ports[1])}
	current := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Port: ports[0]})
	slot := 0

	cfg := testConfig(t, urls...)
	// The defaults (250 ms doubling to 30 s), not the fast retries of the
	// other tests: the waits a deployment has are the ones under test.
	cfg.ConnectRetryMin, cfg.ConnectRetryMax = 0, 0
	tr := &connTracker{}
	cfg.Observer = tr
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, urls, testbroker.PublisherOptions{Window: 10})
	sources := []string{"a", "b"}
	feed := startFeed(t, pub, sources, 500)
	tr.waitDeliveries(t, 50)

	var lags []time.Duration
	for i := range failovers {
		// Each broker serves the feed for a while before it dies: a
		// connection must have delivered and held ConnectRetryMin for its
		// drop to be a failover rather than a flap (see the backoff).
		tr.waitServed(t, 2*mqtt.DefaultConnectRetryMin)
		snap := current.CopyDB()
		// Deliveries (and their acks) after the snapshot: the new broker
		// does not know they were acknowledged, and sends them again.
		tr.waitDeliveries(t, 50)
		var (
			next        *testbroker.Mosquitto
			kind        string
			died, ready time.Time
		)
		if i%2 == 0 {
			kind = "standby promoted"
			slot = 1 - slot
			next = testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: ports[slot]})
			ready = time.Now() // StartFromSnapshotWith returned: a TCP connect to it succeeded
			died = time.Now()
			current.Kill()
		} else {
			kind = "restarted from the snapshot"
			next = current
			died = time.Now()
			current.RestartFrom(snap) // returns once a TCP connect to it succeeded
			ready = time.Now()
		}
		conn := tr.waitConnection(t, i+2, 60*time.Second)
		if conn.broker != next.URL() {
			t.Fatalf("failover %d: connected to %s, want %s", i+1, conn.broker, next.URL())
		}
		// The bound. After a connection that delivered, the first round
		// over the brokers starts at once; while every broker refuses, the
		// waits before the next rounds are drawn from 125–250 ms,
		// 250–500 ms, 0.5–1 s, … (ConnectRetryMin doubling). A broker that
		// is up when the old one dies (a standby) is reached in the first
		// round. One that comes up an outage T after the death is reached
		// by the first round starting after T: the lag is at most the wait
		// under way at T, and each wait is below twice the sum of the
		// earlier ones plus ConnectRetryMin, so below 2T + ConnectRetryMin.
		// The second of margin is for the CONNACK, and for the scheduling
		// of a machine that other builds and tests load: on an idle one the
		// standby is reached in milliseconds. With the old policy, which
		// grew the wait for every connection shorter than a minute, the
		// tenth failover waited 15–30 s before its first round.
		outage := max(0, ready.Sub(died))
		bound := 2*outage + mqtt.DefaultConnectRetryMin + time.Second
		lag := max(0, conn.at.Sub(died.Add(outage)))
		t.Logf("failover %d (%s): broker reachable %v after the death, consumer connected %v after that (bound %v)",
			i+1, kind, outage.Round(time.Millisecond), lag.Round(time.Millisecond), bound.Round(time.Millisecond))
		if lag > bound {
			t.Errorf("failover %d (%s): consumer connected %v after the broker accepted connections, want within %v",
				i+1, kind, lag, bound)
		}
		lags = append(lags, lag)
		current = next
	}
	slices.Sort(lags)
	t.Logf("reconnect lag over %d failovers: median %v, max %v", failovers,
		lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))

	// The last broker gets a tail of messages, which must all arrive.
	feed.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pub.AwaitConnection(ctx); err != nil {
		t.Fatal(err)
	}
	var tail []key
	for _, src := range sources {
		first := int64(len(pubSeqs(pub, src))) + 1
		publish(t, pub, src, 20)
		tail = append(tail, seqs(src, first, first+19)...)
	}
	waitFor(t, "the tail committed", 10*time.Second, func() bool {
		return !slices.ContainsFunc(tail, func(k key) bool { return rec.Count(k) == 0 })
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkReconnectRun(t, tr, rec, pub, failovers)
}

// checkReconnectRun checks a finished run of TestReconnectAfterFailovers:
// one connection per broker, every delivery committed, none twice in one
// connection, the event accounting closed.
func checkReconnectRun(t *testing.T, tr *connTracker, rec *recorder, pub *testbroker.Publisher, failovers int) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.conns) != failovers+1 {
		t.Errorf("%d connections, want one per broker: %d", len(tr.conns), failovers+1)
	}
	committed := rec.Committed()
	if len(committed) != tr.received {
		t.Fatalf("%d deliveries committed, %d received", len(committed), tr.received)
	}
	if tr.received != tr.committed+tr.abandoned || tr.committed != tr.acked+tr.ackDropped {
		t.Errorf("accounting: received %d, committed %d, abandoned %d, acked %d, ack dropped %d",
			tr.received, tr.committed, tr.abandoned, tr.acked, tr.ackDropped)
	}
	// Deliveries are committed in receive order, and every delivery of a
	// connection is received before its Disconnected event: the counts at
	// those events split the commits by connection.
	seen := map[key]int{}
	from := 0
	for conn, to := range append(slices.Clone(tr.downs), len(committed)) {
		inConn := map[key]bool{}
		for _, m := range committed[from:to] {
			k := keyOf(t, m)
			if inConn[k] {
				t.Errorf("connection %d: %v committed twice", conn+1, k)
			}
			inConn[k] = true
			seen[k]++
		}
		from = to
	}
	var lost, replayed int
	for _, p := range pub.Acked() {
		switch n := seen[key{Source: p.Source, Seq: p.Sequence}]; {
		case n == 0:
			lost++
		case n > 1:
			replayed++
		}
	}
	// Not asserted: which acknowledged messages a broker loses depends on
	// the moment of its last save, which only the broker knows.
	t.Logf("%d deliveries over %d connections; of %d messages the brokers acknowledged, %d came again from a restored broker, %d were lost with a dead one",
		len(committed), len(tr.conns), len(pub.Acked()), replayed, lost)
}

func pubSeqs(pub *testbroker.Publisher, source string) []int64 {
	var out []int64
	for _, p := range pub.All() {
		if p.Source == source {
			out = append(out, p.Sequence)
		}
	}
	return out
}

// connTracker is an Observer that records connections with the time of
// their Connected event, and counts deliveries per connection.
type connTracker struct {
	mu     sync.Mutex
	conns  []trackedConn
	downs  []int       // received, at each Disconnected event
	downAt []time.Time // when

	received, committed, abandoned, acked, ackDropped int
}

type trackedConn struct {
	broker string
	at     time.Time
}

func (c *connTracker) Observe(e source.Event) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case source.Connected:
		c.conns = append(c.conns, trackedConn{e.Broker, now})
	case source.Disconnected:
		c.downs = append(c.downs, c.received)
		c.downAt = append(c.downAt, now)
	case source.Received:
		c.received += e.N
	case source.Committed:
		c.committed += e.N
	case source.Abandoned:
		c.abandoned += e.N
	case source.Acked:
		c.acked += e.N
	case source.AckDropped:
		c.ackDropped += e.N
	}
}

// waitConnection waits for the nth connection (1-based) and returns it.
func (c *connTracker) waitConnection(t testing.TB, n int, timeout time.Duration) trackedConn {
	t.Helper()
	var conn trackedConn
	waitFor(t, "connection "+itoa(n), timeout, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.conns) < n {
			return false
		}
		conn = c.conns[n-1]
		return true
	})
	return conn
}

// waitServed waits until the current connection has delivered and is at
// least d old.
func (c *connTracker) waitServed(t testing.TB, d time.Duration) {
	t.Helper()
	waitFor(t, "the connection to serve "+d.String(), 30*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := len(c.conns)
		return n > 0 && len(c.downs) == n-1 && // up
			c.received > c.lastDown() && time.Since(c.conns[n-1].at) >= d
	})
}

func (c *connTracker) lastDown() int {
	if len(c.downs) == 0 {
		return 0
	}
	return c.downs[len(c.downs)-1]
}

// waitDeliveries waits for n more deliveries.
func (c *connTracker) waitDeliveries(t testing.TB, n int) {
	t.Helper()
	c.mu.Lock()
	want := c.received + n
	c.mu.Unlock()
	waitFor(t, itoa(n)+" more deliveries", 30*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.received >= want
	})
}

// feed publishes each source's next sequences at rate per second and
// source, from its own goroutine, until stop. Publishes that fail (the
// broker died) are not retried; the feed waits for the publisher to
// reconnect instead of spinning.
type feed struct {
	pub  *testbroker.Publisher
	rate float64
	ctx  context.Context
	stop func()
}

func startFeed(t testing.TB, pub *testbroker.Publisher, sources []string, rate float64) *feed {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	f := &feed{pub: pub, rate: rate, ctx: ctx}
	f.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(f.stop)
	for _, src := range sources {
		wg.Go(func() { f.run(src) })
	}
	return f
}

func (f *feed) run(src string) {
	const chunk = 10
	start := time.Now()
	for sent := 0; ; sent += chunk {
		// A publish in flight when its broker dies is answered by nobody,
		// and a chunk normally takes milliseconds: give up on it soon, so
		// the feed goes on through the next broker.
		ctx, cancel := context.WithTimeout(f.ctx, 500*time.Millisecond)
		acked := f.pub.Publish(ctx, src, chunk)
		cancel()
		if acked < chunk {
			_ = f.pub.AwaitConnection(f.ctx)
		}
		due := start.Add(time.Duration(float64(sent+chunk) / f.rate * float64(time.Second)))
		t := time.NewTimer(time.Until(due))
		select {
		case <-f.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// TestOneClientIDTwoConsumersBackOff runs two consumers with one client id
// on one broker, with the default backoff and a feed. Each connection takes
// the session from the other, which Mosquitto 2.0 closes without a
// DISCONNECT, often after it delivered: a takeover storm unless a
// connection that short counts as a flap. It must: the number of
// connections grows slowly, not as fast as the two can connect.
func TestOneClientIDTwoConsumersBackOff(t *testing.T) {
	const conns = 12
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	cfg := testConfig(t, m.URL())
	cfg.ConnectRetryMin, cfg.ConnectRetryMax = 0, 0 // the defaults: 250 ms doubling to 30 s
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 10})
	startFeed(t, pub, []string{"a"}, 500)
	tr := &connTracker{} // both consumers' events
	cfg.Observer = tr
	first := start(t, cfg, newRecorder(t))
	first.waitReady(t)
	tr.waitServed(t, 2*mqtt.DefaultConnectRetryMin)
	began := time.Now()
	start(t, cfg, newRecorder(t))
	tr.waitConnection(t, conns+1, 60*time.Second)
	took := time.Since(began)
	// The floor. A connection that held less than ConnectRetryMin is a
	// flap, and the kth flap in a row of a consumer waits at least
	// ConnectRetryMin/2·2^(k-1) before its next attempt; only a
	// connection that held ConnectRetryMin resets that. So each new
	// connection after the first two costs one of those waits or a
	// connection of ConnectRetryMin: at least ConnectRetryMin/2 each, 1.25 s
	// for ten. A loaded machine only makes it longer. Without the rule the
	// two took the session from each other every millisecond.
	floor := time.Duration(conns-2) * mqtt.DefaultConnectRetryMin / 2
	t.Logf("%d connections of one client id in %v (at least %v)", conns, took.Round(time.Millisecond), floor)
	if took < floor {
		t.Errorf("%d connections of one client id within %v, want at least %v: a takeover storm", conns, took, floor)
	}
}

// TestQuietConnectionReconnectsAtOnce: a connection that delivered nothing
// but answered keepalive pings proved the link as well as one that
// delivered, so a quiet feed's failover is followed by a round at once,
// not a flap's backoff. The decision is read from the consumer's log, not
// from timing.
func TestQuietConnectionReconnectsAtOnce(t *testing.T) {
	primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, Verbose: true})
	standby := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	cfg := testConfig(t, primary.URL(), standby.URL())
	cfg.ConnectRetryMin, cfg.ConnectRetryMax = 0, 0 // the defaults: 250 ms doubling to 30 s
	cfg.KeepAlive = time.Second
	logs := &logCapture{next: cfg.Logger.Handler()}
	cfg.Logger = slog.New(logs)
	tr := &connTracker{}
	cfg.Observer = tr
	r := start(t, cfg, newRecorder(t))
	r.waitReady(t)
	// Mosquitto logs every packet (Verbose). paho pings as it connects,
	// then after each keepalive without traffic: the second PINGRESP comes
	// a keepalive (1 s) after the first, so the connection has held longer
	// than ConnectRetryMin by then.
	waitFor(t, "two PINGRESPs to the consumer", 10*time.Second, func() bool {
		return strings.Count(primary.Log(), "Sending PINGRESP to "+cfg.ClientID) >= 2
	})
	primary.Kill()
	if conn := tr.waitConnection(t, 2, 10*time.Second); conn.broker != standby.URL() {
		t.Fatalf("reconnected to %s, want the standby %s", conn.broker, standby.URL())
	}
	lost, ok := logs.first("mqtt connection lost")
	if !ok {
		t.Fatal(`no "mqtt connection lost" logged`)
	}
	if got := lost["reconnect_at_once"]; got != "true" {
		t.Errorf("a quiet connection that answered pings was lost with reconnect_at_once=%s, want true (held %s)", got, lost["held"])
	}
	if w, ok := logs.first("mqtt waiting before reconnecting"); ok {
		t.Errorf("the consumer waited %s before reconnecting", w["wait"])
	}
}

// logCapture is a slog.Handler that keeps every record's message and
// attributes, and passes the record on to next.
type logCapture struct {
	next slog.Handler

	mu      sync.Mutex
	records []capturedRecord
}

type capturedRecord struct {
	msg   string
	attrs map[string]string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCapture) Handle(ctx context.Context, r slog.Record) error {
	rec := capturedRecord{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return h.next.Handle(ctx, r)
}

// WithAttrs and WithGroup are not used by the consumer: they drop the
// capture.
func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler { return h.next.WithAttrs(as) }
func (h *logCapture) WithGroup(name string) slog.Handler    { return h.next.WithGroup(name) }

// first returns the attributes of the first record whose message starts
// with prefix.
func (h *logCapture) first(prefix string) (map[string]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if strings.HasPrefix(r.msg, prefix) {
			return r.attrs, true
		}
	}
	return nil, false
}
