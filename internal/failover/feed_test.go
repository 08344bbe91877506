package failover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The route under test. Its effect makes a double application visible:
// every applied message adds its value (1) to its source's count, so the
// count must equal the number of distinct sequences applied, and sets
// `last` to its sequence, which only a newer sequence may overwrite.
const (
	routeName   = "feed"
	topicPrefix = "t/"
	countField  = "count"
	lastField   = "last"
)

// The id route a setup may add: meters on m/<meter>/energy, each message
// identified by its msgId alone ("<meter>-<n>") and adding its value (1) to
// its meter's count, so the count must equal the number of distinct ids
// applied. No sequence: a message the broker loses on this route cannot
// show as a gap.
const (
	idRouteName = "meters"
	meterEntity = "meter/"
)

const configTemplate = `store:  %s
window: {ttl: 2h, max_entries: 1000000, sequence_span: 4096}
routes:
  - name: ` + routeName + `
    topic: "` + topicPrefix + `#"
    source: [source_id]
    sequence: sequence
    epoch: boot_id
    effects:
      - entity: "src/{source_id}"
        add: {` + countField + `: value}
        set: {` + lastField + `: sequence}
%s%s%smqtt:
  brokers: [%s]
  client_id: %s
  session_expiry: 1h
%shttp: {listen: %q}
`

const idRouteTemplate = `  - name: ` + idRouteName + `
    topic: "m/+/energy"
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "` + meterEntity + `{topic[1]}"
        add: {` + countField + `: value}
`

// A setup with a downstream broker forwards every applied message of both
// routes to it, under cleanPrefix followed by the message's own topic.
const (
	cleanPrefix   = "clean/"
	forwardEffect = `      - forward: {topic: "` + cleanPrefix + `{topic}"}
`
	outputsTemplate = "outputs: {mqtt: {brokers: [%s]}}\n"
)

// setup is one replayguard configuration: a store directory, the brokers
// to consume and, for a child process, an HTTP listener.
type setup struct {
	Path   string // the configuration file
	Listen string // host:port of the HTTP API, or config.ListenOff
	Config *config.Config
}

// setupOptions vary a configuration from the one newSetup writes.
type setupOptions struct {
	API        bool   // serve HTTP on a free port
	Store      string // the store section as a YAML flow mapping; empty: embedded, in a new directory
	ClientID   string // mqtt.client_id; empty: a unique one
	ShareGroup string // mqtt.share_group; empty: none
	IDRoute    bool   // add the id route, meters
	// SQL adds a sql effect to each route (the store must be postgres):
	// every applied message inserts a row into a table of the user's own
	// (see sqlTables).
	SQL bool
	// ReceiveMaximum is mqtt.receive_maximum, and mqtt.batch_size, which
	// may not exceed it; 0: the defaults. Mosquitto sends an MQTT 5 client
	// at most this many unacknowledged messages and queues the rest.
	ReceiveMaximum int
	// Protocol is mqtt.protocol (5, 3.1.1 or auto); empty: the default.
	Protocol string
	// Downstream, a broker URL, adds a forward effect to every route:
	// each applied message is published to this broker (outputs.mqtt) on
	// cleanPrefix + its topic. Empty: no forward.
	Downstream string
	// Forward, a forward effect's target as a YAML flow mapping
	// ({webhook: "…"} or {nats: "…"}), adds that effect to every route,
	// and Outputs is then the outputs section (YAML, may be empty): the
	// webhook and NATS outputs, where Downstream is the MQTT one.
	Forward, Outputs string
	// Sparkplug adds the Sparkplug route of spGroup (spRoute).
	Sparkplug bool
	// Audit is the audit section, YAML; empty: none.
	Audit string
	// AdoptLostAfter is mqtt.adopt_lost_after, a duration; empty: the
	// default.
	AdoptLostAfter string
	// BatchLinger is mqtt.batch_linger, a duration: how long a batch
	// waits for more deliveries after its first; empty: the default.
	BatchLinger string
}

// newSetup writes a configuration consuming brokers (in failover order)
// into a new store. With api, the daemon serves HTTP on a free port.
func newSetup(t testing.TB, brokers []string, api bool) *setup {
	t.Helper()
	return newSetupWith(t, brokers, setupOptions{API: api})
}

// newSetupWith writes a configuration consuming brokers, varied by o.
func newSetupWith(t testing.TB, brokers []string, o setupOptions) *setup {
	t.Helper()
	dir := t.TempDir()
	s := &setup{Path: filepath.Join(dir, "replayguard.yaml"), Listen: config.ListenOff}
	if o.API {
		s.Listen = fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	}
	if o.Store == "" {
		o.Store = fmt.Sprintf("{kind: embedded, path: %q}", filepath.Join(dir, "data"))
	}
	if o.ClientID == "" {
		o.ClientID = testbroker.UniqueClientID("rg-failover")
	}
	o.Store = withJournal(o.Store, filepath.Join(dir, "journal"))
	var feedExtra, routes, outputs, mqttExtra string
	if o.IDRoute {
		routes = idRouteTemplate
	}
	if o.SQL {
		feedExtra = feedSQLEffect
		if o.IDRoute {
			routes += meterSQLEffect
		}
	}
	if o.Downstream != "" {
		feedExtra += forwardEffect
		if o.IDRoute {
			routes += forwardEffect
		}
		outputs = fmt.Sprintf(outputsTemplate, o.Downstream)
	}
	if o.Forward != "" {
		effect := "      - forward: " + o.Forward + "\n"
		feedExtra += effect
		if o.IDRoute {
			routes += effect
		}
		outputs = o.Outputs
	}
	if o.Sparkplug {
		routes += spRoute
	}
	outputs += o.Audit
	if o.ShareGroup != "" {
		mqttExtra += fmt.Sprintf("  share_group: %s\n", o.ShareGroup)
	}
	if o.Protocol != "" {
		mqttExtra += fmt.Sprintf("  protocol: %q\n", o.Protocol)
	}
	if o.AdoptLostAfter != "" {
		mqttExtra += fmt.Sprintf("  adopt_lost_after: %s\n", o.AdoptLostAfter)
	}
	if o.BatchLinger != "" {
		mqttExtra += fmt.Sprintf("  batch_linger: %s\n", o.BatchLinger)
	}
	if o.ReceiveMaximum != 0 {
		mqttExtra += fmt.Sprintf("  receive_maximum: %d\n  batch_size: %[1]d\n", o.ReceiveMaximum)
	}
	text := fmt.Sprintf(configTemplate, o.Store, feedExtra, routes, outputs, strings.Join(brokers, ", "), o.ClientID, mqttExtra, s.Listen)
	if err := os.WriteFile(s.Path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(s.Path)
	if err != nil {
		t.Fatalf("configuration:\n%s\n%v", text, err)
	}
	if err := cfg.ValidateRun(); err != nil {
		t.Fatal(err)
	}
	s.Config = cfg
	return s
}

// newPublisher publishes the route's messages to brokers, trying them in
// order: DefaultPayload carries source_id, sequence, boot_id and value 1.
func newPublisher(t testing.TB, brokers []string, window int) *testbroker.Publisher {
	t.Helper()
	return testbroker.NewPublisher(t, brokers, testbroker.PublisherOptions{
		Window: window,
		Topic:  func(source string) string { return topicPrefix + source },
	})
}

// newMeterPublisher publishes the id route's messages to brokers, trying
// them in order: meter M's n-th message goes to m/M/energy and carries
// msgId "M-n" and value 1.
func newMeterPublisher(t testing.TB, brokers []string, window int) *testbroker.Publisher {
	t.Helper()
	return testbroker.NewPublisher(t, brokers, testbroker.PublisherOptions{
		Window: window,
		Topic:  meterTopic,
		Payload: func(meter string, n int64) []byte {
			return fmt.Appendf(nil, `{"msgId":%q,"value":1}`, meterID(meter, n))
		},
	})
}

func meterTopic(meter string) string { return "m/" + meter + "/energy" }

func meterID(meter string, n int64) string { return fmt.Sprintf("%s-%d", meter, n) }

// sourceNames returns s1…sn.
func sourceNames(n int) []string { return names("s", n) }

// meterNames returns m1…mn.
func meterNames(n int) []string { return names("m", n) }

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// publishEach publishes the next n sequences of every source and fails the
// test unless the broker acknowledged them all.
func publishEach(t testing.TB, pub *testbroker.Publisher, sources []string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, src := range sources {
		if got := pub.Publish(ctx, src, n); got != n {
			t.Fatalf("broker acknowledged %d of %d publishes of %s", got, n, src)
		}
	}
}

// feeder publishes a steady feed from a goroutine per source until each has
// published perSource sequences (0: until stopped). The sources of the
// first half publish one message at a time, in sequence order, as a device
// does; the others in chunks of 20 awaiting their PUBACKs together, which
// reach the broker in any order, as from a gateway that forwards
// concurrently: late arrivals open gaps that fill again. A publish that is
// not acknowledged (a broker going down) is left as it is, and the source
// waits for a connection again.
type feeder struct {
	pub       *testbroker.Publisher
	perSource int
	rate      float64 // messages per second, of each source

	attempted atomic.Int64
	failed    atomic.Int64
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
}

// startFeeder starts a feed of rate messages per second over all sources.
func startFeeder(t testing.TB, pub *testbroker.Publisher, sources []string, perSource int, rate float64) *feeder {
	f := &feeder{pub: pub, perSource: perSource, rate: rate / float64(len(sources)),
		stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i, src := range sources {
		chunk := 1
		if i >= len(sources)/2 {
			chunk = 20
		}
		wg.Go(func() { f.run(src, chunk) })
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
	t.Cleanup(f.Stop)
	return f
}

func (f *feeder) run(src string, chunk int) {
	start := time.Now()
	for sent := 0; f.perSource == 0 || sent < f.perSource; {
		n := chunk
		if f.perSource > 0 {
			n = min(n, f.perSource-sent)
		}
		if !f.publish(src, n) {
			return
		}
		sent += n
		due := start.Add(time.Duration(float64(sent) / f.rate * float64(time.Second)))
		select {
		case <-f.stop:
			return
		case <-time.After(time.Until(due)):
		}
	}
}

// publish sends n messages of src; it reports false when the feeder was
// stopped.
func (f *feeder) publish(src string, n int) bool {
	// A publish in flight when the broker dies is answered by nobody: a
	// chunk normally takes milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	acked := f.pub.Publish(ctx, src, n)
	cancel()
	f.attempted.Add(int64(n))
	if acked == n {
		return true
	}
	f.failed.Add(int64(n - acked))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_ = f.pub.AwaitConnection(ctx)
	return ctx.Err() == nil
}

// Attempted counts the publishes so far, acknowledged or not.
func (f *feeder) Attempted() int64 { return f.attempted.Load() }

// Wait waits until the feeder has published everything, failing the test
// after timeout.
func (f *feeder) Wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(timeout):
		t.Fatalf("feeder not done within %v: %d published", timeout, f.Attempted())
	}
}

// Stop stops the feeder and waits for it.
func (f *feeder) Stop() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// waitProgress waits until the feeder has published n messages.
func (f *feeder) waitProgress(t testing.TB, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d messages published", n), time.Minute, func() bool {
		select {
		case <-f.done:
			return true
		default:
			return f.Attempted() >= n
		}
	})
}

// publishTail publishes n more sequences of every source once the publisher
// is connected, until one chunk of each is acknowledged whole: the highest
// sequences, which reveal every earlier loss as a gap.
func publishTail(t testing.TB, pub *testbroker.Publisher, sources []string, n int) {
	t.Helper()
	for _, src := range sources {
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := pub.AwaitConnection(ctx); err != nil {
				cancel()
				t.Fatalf("publisher not connected: %v", err)
			}
			got := pub.Publish(ctx, src, n)
			cancel()
			if got == n {
				break
			}
			if attempt == 3 {
				t.Fatalf("tail of %s: %d of %d acknowledged, four times", src, got, n)
			}
		}
	}
}

// withJournal puts a shared store's member journal in dir, not in the
// test's working directory, where a journal left by an earlier run would
// be compared with a new server's store.
func withJournal(store, dir string) string {
	if !strings.HasPrefix(store, "{kind: postgres") && !strings.HasPrefix(store, "{kind: redis") || strings.Contains(store, "journal:") {
		return store
	}
	return strings.TrimSuffix(store, "}") + fmt.Sprintf(", journal: {path: %q}}", dir)
}
