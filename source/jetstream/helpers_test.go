package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
	"github.com/replayguard/replayguard/source/jetstream"
	"github.com/replayguard/replayguard/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testStream   = "PLANT"
	testConsumer = "replayguard"
)

// testConfig consumes testStream on url with small batches and fast
// retries, logging to t.
func testConfig(t testing.TB, url string) jetstream.Config {
	return jetstream.Config{
		URL:             url,
		Stream:          testStream,
		Consumer:        testConsumer,
		BatchSize:       32,
		BatchLinger:     2 * time.Millisecond,
		AckWait:         5 * time.Second,
		BindRetryMin:    20 * time.Millisecond,
		BindRetryMax:    200 * time.Millisecond,
		CommitRetryMin:  10 * time.Millisecond,
		CommitRetryMax:  50 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          testLogger(t),
	}
}

func testLogger(t testing.TB) *slog.Logger { return consumetest.Logger(t, slog.LevelInfo) }

// meters is the engine of the tests: plant/<meter>/energy readings,
// sequenced per meter, summed into meter/<meter>.
// metersRoute sums each meter's sequenced readings into meter/<meter>.
var metersRoute = engine.Route{
	Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, Sequence: "seq",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
}

func meters(t testing.TB) (*engine.Engine, *memory.Store) {
	t.Helper()
	st := memory.New()
	e, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{metersRoute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, st
}

// readings are n sequenced readings of each meter, 1 kWh each, with
// message ids for the stream's duplicate window.
func readings(n int, meterNames ...string) []testbroker.JSMessage {
	var out []testbroker.JSMessage
	for seq := 1; seq <= n; seq++ {
		for _, m := range meterNames {
			out = append(out, testbroker.JSMessage{
				Subject: "plant." + m + ".energy",
				Data:    fmt.Appendf(nil, `{"seq":%d,"kwh":1}`, seq),
				ID:      fmt.Sprintf("%s-%d", m, seq),
			})
		}
	}
	return out
}

// publishAll publishes msgs and waits until the stream holds them.
func publishAll(t testing.TB, n *testbroker.NATS, msgs []testbroker.JSMessage) {
	t.Helper()
	pub, err := testbroker.PublishJS(n.URL(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// recorder is a Processor that counts the outcomes the engine committed.
type recorder struct {
	p    jetstream.Processor
	fail atomic.Int32 // Process calls left to fail
	slow atomic.Int64 // nanoseconds the next Process call sleeps first
	// down is how long, in nanoseconds, Process calls fail from the next
	// one on: a store that does not answer for a while.
	down      atomic.Int64
	downUntil atomic.Int64 // UnixNano

	mu       sync.Mutex
	outcomes map[engine.Outcome]int
	calls    int
}

func newRecorder(p jetstream.Processor) *recorder {
	return &recorder{p: p, outcomes: map[engine.Outcome]int{}}
}

var errStore = errors.New("store unavailable (test)")

func (r *recorder) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	if d := r.slow.Swap(0); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if d := r.down.Swap(0); d > 0 {
		r.downUntil.Store(time.Now().Add(time.Duration(d)).UnixNano())
	}
	if r.fail.Add(-1) >= 0 || time.Now().UnixNano() < r.downUntil.Load() {
		return nil, errStore
	}
	ds, err := r.p.Process(ctx, msgs)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		r.outcomes[d.Outcome]++
	}
	return ds, nil
}

func (r *recorder) count(o engine.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[o]
}

// answerLost commits its first batch through p but reports a failure, as
// if the store's answer were lost, and fails every call after it.
type answerLost struct {
	p     jetstream.Processor
	calls atomic.Int32
}

func (a *answerLost) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if a.calls.Add(1) == 1 {
		if _, err := a.p.Process(ctx, msgs); err != nil {
			return nil, err
		}
	}
	return nil, errStore
}

// running is a consumer whose Run goes on in the background.
type running struct {
	*jetstream.Consumer
	run *consumetest.Run
}

func start(t testing.TB, cfg jetstream.Config, p jetstream.Processor) *running {
	t.Helper()
	c, err := jetstream.New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return &running{c, consumetest.Start(t, c)}
}

func (r *running) stop() error { return r.run.Stop() }

var waitFor = consumetest.WaitFor

// allAcked waits until the server holds nothing unacknowledged or
// undelivered for the test consumer.
func allAcked(t testing.TB, n *testbroker.NATS, timeout time.Duration) {
	t.Helper()
	waitFor(t, "every message acknowledged on the server", timeout, func() bool {
		info, err := n.ConsumerInfo(testStream, testConsumer)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// redelivered returns how many audit records of st carry dup: decisions
// on a message the server delivered again.
func redelivered(t testing.TB, st *memory.Store) int {
	t.Helper()
	n := 0
	err := st.ScanAudit(context.Background(), 0, func(r engine.AuditRecord) error {
		if r.Dup {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// kwh returns the summed kWh of meter/<m>, as text.
func kwh(e *engine.Engine, m string) string {
	for _, s := range e.State() {
		if s.Name == "meter/"+m {
			return s.Fields.Get("kwh").Num
		}
	}
	return ""
}

// failingConsumer is a server with the test stream, and a recorder on an
// engine of its own whose commits all fail, with the configuration to
// consume the stream through it.
func failingConsumer(t *testing.T) (*testbroker.NATS, *recorder, jetstream.Config) {
	t.Helper()
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	failing := newRecorder(e)
	failing.fail.Store(1 << 20)
	return n, failing, testConfig(t, n.URL())
}
