package mqtt_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
	"github.com/replayguard/replayguard/source/mqtt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testFilter = "replayguard/test/#"

// testConfig is a consumer of brokers with a fresh client id and fast
// retries, logging to t.
func testConfig(t testing.TB, brokers ...string) mqtt.Config {
	return mqtt.Config{
		Brokers:         brokers,
		ClientID:        testbroker.UniqueClientID("rg-consumer"),
		Filters:         []mqtt.Filter{{Topic: testFilter, QoS: 1}},
		BatchSize:       16,
		BatchLinger:     5 * time.Millisecond,
		ConnectRetryMin: 20 * time.Millisecond,
		ConnectRetryMax: 200 * time.Millisecond,
		ConnectTimeout:  2 * time.Second,
		CommitRetryMin:  10 * time.Millisecond,
		CommitRetryMax:  50 * time.Millisecond,
		ShutdownTimeout: 2 * time.Second,
		Logger:          testLogger(t),
	}
}

// testLogger logs to t until the test ends.
func testLogger(t testing.TB) *slog.Logger { return consumetest.Logger(t, slog.LevelDebug) }

// running is a consumer whose Run goes on in the background.
type running struct {
	*mqtt.Consumer
	run *consumetest.Run
}

// start runs a consumer of cfg until stop or the end of the test.
func start(t testing.TB, cfg mqtt.Config, p mqtt.Processor) *running {
	t.Helper()
	c, err := mqtt.New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return &running{c, consumetest.Start(t, c)}
}

// stop cancels Run and returns what it returned.
func (r *running) stop() error { return r.run.Stop() }

// waitReady waits until the consumer is connected and subscribed.
func (r *running) waitReady(t testing.TB) {
	t.Helper()
	waitFor(t, "consumer ready", 10*time.Second, r.Ready)
}

var waitFor = consumetest.WaitFor

// The messages of the tests, and a Processor and an Observer that record.
type (
	key      = consumetest.Key
	recorder = consumetest.Recorder
	events   = consumetest.Events
)

var (
	keyOf       = consumetest.KeyOf
	keys        = consumetest.Keys
	seqs        = consumetest.Seqs
	fmtKeys     = consumetest.FmtKeys
	newRecorder = consumetest.NewRecorder
)

// publish sends n messages of source through pub and fails unless all were
// acknowledged.
func publish(t testing.TB, pub *testbroker.Publisher, source string, n int) {
	t.Helper()
	if got := pub.Publish(context.Background(), source, n); got != n {
		t.Fatalf("broker acknowledged %d of %d publishes", got, n)
	}
}

// drainSession connects a fresh consumer under clientID and returns what it
// receives within quiet of silence: what the broker still held unacked.
func drainSession(t testing.TB, url, clientID string, quiet time.Duration) []engine.Message {
	t.Helper()
	cfg := testConfig(t, url)
	cfg.ClientID = clientID
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	last, lastChange := int64(-1), time.Now()
	for time.Since(lastChange) < quiet {
		if n := rec.Len(); n != last {
			last, lastChange = n, time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	return rec.Committed()
}
