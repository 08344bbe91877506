package jetstream_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
)

// nats-server 2.9 answers a request to create a durable that exists with
// the consumer's state as it was when the server last loaded it (its
// start, a restart), not as it is: a bind that read the ack floor there
// took messages decided and acknowledged since for never acknowledged,
// and told a purge of them as messages lost. Here the server restarts
// under a running consumer, which then decides and acknowledges more;
// a purge of them all while it is stopped removes nothing it had not
// acknowledged, so the next bind tells nothing lost.
func TestABindAfterAServerRestartReadsTheConsumersStateAsItIsNow(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	events := &consumetest.Events{}
	cfg.Observer = events
	r := start(t, cfg, e)
	publishAll(t, n, readings(5, "m1"))
	allAcked(t, n, 10*time.Second)
	n.Stop()
	n.Restart()
	waitFor(t, "connected again", 10*time.Second, r.Ready)
	publishAll(t, n, readings(10, "m1")[5:])
	allAcked(t, n, 10*time.Second)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if info, err := n.ConsumerInfo(testStream, testConsumer); err != nil || info.AckFloor.Stream != 10 {
		t.Fatalf("consumer before the purge: %+v, %v; want every message acknowledged", info, err)
	}
	n.PurgeStream(testStream)

	r = start(t, cfg, e)
	waitFor(t, "bound again", 10*time.Second, r.Ready)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := events.Sum(source.Lost); got != 0 || logs.has("ERROR", "never acknowledged") {
		t.Errorf("%d messages told lost, where the purge removed only messages acknowledged:\n%s", got, logs.String())
	}
	if got := kwh(e, "m1"); got != "10" {
		t.Errorf("meter/m1 kwh = %s, want 10", got)
	}
}
