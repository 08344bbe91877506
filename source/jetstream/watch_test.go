package jetstream_test

import (
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A max_deliver set on the durable consumer while replayguard runs (an
// operator's `nats consumer edit`) would make the server give up on a
// message after that many deliveries, never decided and with no audit
// record: it is set back to unlimited, as at the bind, and warned about.
func TestAMaxDeliverSetOnTheServerWhileRunningIsSetBackToUnlimited(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)

	n.SetConsumerMaxDeliver(testStream, testConsumer, 1)
	waitFor(t, "max_deliver unlimited again", 10*time.Second, func() bool {
		info, err := n.ConsumerInfo(testStream, testConsumer)
		return err == nil && info.Config.MaxDeliver == -1
	})
	if !logs.has("WARN", "max_deliver was set on the server", "max_deliver=1") {
		t.Error("no warning that max_deliver was set")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// keepLast limits the test stream to its last n messages, discarding the
// oldest.
func keepLast(n *testbroker.NATS, last int64) {
	n.UpdateStream(testStream, func(c *natsjs.StreamConfig) { c.MaxMsgs, c.Discard = last, natsjs.DiscardOld })
}

// Messages the stream removed before the durable consumer received them
// (here by its max_msgs limit, while replayguard was stopped) are never
// decided, and no gap shows them when they are a source's first: the bind
// tells them, with their stream sequences.
func TestMessagesTheStreamRemovedBeforeTheConsumerReceivedThemAreToldAtTheBind(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	keepLast(n, 3)
	publishAll(t, n, readings(2, "m1"))
	consumeFiltered(t, n)
	publishAll(t, n, readings(5, "m2")) // 3 to 7; 3 and 4 discarded

	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if !logs.has("ERROR", "removed messages before this consumer received them", "from_sequence=3", "through_sequence=4") {
		t.Error("no error names stream sequences 3 and 4, discarded before the consumer received them")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
