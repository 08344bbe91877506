package failover

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/mqtt"
)

// TestRepeatedBrokerFailovers fails the broker again and again under one
// `replayguard run` that is never restarted, with a feed throughout. Each
// new broker starts from a copy of the last one's latest save, older than
// the acknowledgements that followed it: every other failover promotes a
// standby started from the copy on the other port, the rest restart the
// broker in place from it. So each new broker replays messages already
// applied, and loses those the dead one acknowledged to the publisher after
// the save. The consumer must reach every new broker within the bound
// below, and the store must hold every acknowledged message applied once
// or inside a reported gap.
func TestRepeatedBrokerFailovers(t *testing.T) {
	skipShort(t)
	failovers := 10
	if soak() {
		failovers = 20
	}
	ports := [2]int{testbroker.FreePort(t), testbroker.FreePort(t)}
	for ports[1] == ports[0] {
		ports[1] = testbroker.FreePort(t)
	}
	brokers := []string{fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]), fmt.Sprintf("tcp://127.0.0.1:%d", ports[1])}
	current := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Port: ports[0]})
	slot := 0
	s := newSetup(t, brokers, true) // the default reconnect backoff
	d := startDaemon(t, s)
	d.WaitReady()
	pub := newPublisher(t, brokers, 20)
	sources := sourceNames(4)
	f := startFeeder(t, pub, sources, 0, 2000)

	var lags []time.Duration
	for i := range failovers {
		// The broker serves the feed for a while (a connection must have
		// delivered and held ConnectRetryMin for its drop to count as a
		// failover), then its save is copied, then it acknowledges more.
		f.waitProgress(t, f.Attempted()+1000)
		snap := current.CopyDB()
		f.waitProgress(t, f.Attempted()+200)
		reconnects := d.Metrics()["replayguard_reconnects_total"]
		var (
			kind        string
			died, ready time.Time
		)
		if i%2 == 0 {
			kind = "standby promoted"
			slot = 1 - slot
			next := testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: ports[slot]})
			ready = time.Now() // a TCP connect to it succeeded
			died = time.Now()
			current.Kill()
			current = next
		} else {
			kind = "restarted from the copy"
			died = time.Now()
			current.RestartFrom(snap) // returns once a TCP connect to it succeeded
			ready = time.Now()
		}
		waitFor(t, "the consumer's reconnect", time.Minute, func() bool {
			return d.Metrics()["replayguard_reconnects_total"] > reconnects
		})
		// Seen by polling /metrics: late by a poll at most, never early.
		connected := time.Now()
		// The bound, as in source/mqtt's TestReconnectAfterFailovers: the
		// first round over the brokers starts at once after a connection
		// that delivered, and the waits of the failed rounds after it
		// double from ConnectRetryMin/2, so a broker that comes up an
		// outage T after the death is reached within 2T + ConnectRetryMin.
		// The second is margin for the CONNACK, the poll, and a machine
		// loaded by other builds and tests.
		outage := max(0, ready.Sub(died))
		bound := 2*outage + mqtt.DefaultConnectRetryMin + time.Second
		lag := max(0, connected.Sub(died.Add(outage)))
		t.Logf("failover %d (%s) at %d published: broker reachable %v after the death, consumer reconnected %v after that (bound %v)",
			i+1, kind, f.Attempted(), outage.Round(time.Millisecond), lag.Round(time.Millisecond), bound.Round(time.Millisecond))
		if lag > bound {
			t.Errorf("failover %d (%s): consumer reconnected %v after the broker accepted connections, want within %v",
				i+1, kind, lag, bound)
		}
		lags = append(lags, lag)
	}
	f.Stop()
	publishTail(t, pub, sources, 20)
	d.WaitHigh(lastSequences(pub))
	waitStable(t, "the audit position", time.Second, time.Minute, d.Position)
	checkFinalRun(t, d, 0)
	if got := d.Metrics()["replayguard_reconnects_total"]; got != float64(failovers) {
		t.Errorf("%v reconnects, want one per failover: %d", got, failovers)
	}
	d.Stop()

	r := verifyStore(t, openStore(t, s), pub, sources)
	r.checkReplays(t, false)
	slices.Sort(lags)
	t.Logf("reconnect lag over %d failovers: median %v, max %v; %d acknowledged messages lost with a dead broker, all inside reported gaps",
		failovers, lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond), r.Lost)
}
