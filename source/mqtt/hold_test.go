package mqtt_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// The rounds a hold kept the consumer off its brokers are no failed
// rounds: once it ends, a round that fails (the broker restarting) is
// followed by the first wait of the backoff, not by its longest, as if
// every second held had been a round the brokers refused.
func TestTheRoundsHeldDoNotGrowTheReconnectWait(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	b.Stop()
	cfg := testConfig(t, b.URL())
	cfg.ConnectRetryMin, cfg.ConnectRetryMax = time.Second, 20*time.Second
	ev := &events{}
	cfg.Observer = ev
	var held atomic.Bool
	held.Store(true)
	cfg.Hold = func() string {
		if held.Load() {
			return "the lease ran out"
		}
		return ""
	}
	r := start(t, cfg, newRecorder(t))
	time.Sleep(6 * time.Second) // six rounds held
	if n := ev.Sum(source.ConnectFailed); n != 0 {
		t.Fatalf("%d connection attempts failed while held, want none made", n)
	}
	held.Store(false)
	waitFor(t, "a round failed after the hold", 5*time.Second, func() bool { return ev.Sum(source.ConnectFailed) > 0 })
	b.Restart()
	restarted := time.Now()
	waitFor(t, "consumer ready within the backoff's first waits after the broker restarted", 5*time.Second, r.Ready)
	t.Logf("ready %v after the broker restarted", time.Since(restarted).Round(time.Millisecond))
}
