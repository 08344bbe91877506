package jetstream_test

import (
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
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

	setMaxDeliverAndWaitForItBack(t, n, logs)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// setMaxDeliverAndWaitForItBack sets the durable's max_deliver to 1 on
// the server, as an operator's `nats consumer edit` does, and waits until
// replayguard has set it back to unlimited and warned of it. The server
// holds the update before its answer reaches replayguard, which warns once
// it has the answer: both are waited for.
func setMaxDeliverAndWaitForItBack(t *testing.T, n *testbroker.NATS, logs *logBuffer) {
	t.Helper()
	n.SetConsumerMaxDeliver(testStream, testConsumer, 1)
	waitFor(t, "max_deliver unlimited again, with a warning that it was set", 10*time.Second, func() bool {
		info, err := n.ConsumerInfo(testStream, testConsumer)
		return err == nil && info.Config.MaxDeliver == -1 && logs.has("WARN", "max_deliver was set on the server", "max_deliver=1")
	})
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
	// consumeFiltered waits until no pull request of the stopped consumer
	// waits at the server: one would take the next message, which the
	// stream then removes with no acknowledgement; the server may move the
	// ack floor past it, and nothing tells it then. The test is of
	// messages never delivered.
	consumeFiltered(t, n)
	publishAll(t, n, readings(5, "m2")) // 3 to 7; 3 and 4 discarded

	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if !logs.has("ERROR", "removed messages this consumer never acknowledged", "from_sequence=3", "through_sequence=4") {
		t.Error("no error names stream sequences 3 and 4, discarded before the consumer received them")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A consumer deleted under replayguard ends Run with where to resume: a
// new one would deliver the stream from its first message, where an id
// route's messages whose keys have left the window apply again, so the
// next start on the same store refuses to create it. The durable created
// from the sequence named delivers nothing twice into effect and misses
// nothing.
func TestADeletedConsumerEndsRunNamingWhereToResume(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg, _ := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	publishAll(t, n, readings(5, "m1"))
	allAcked(t, n, 10*time.Second)
	n.DeleteConsumer(testStream, testConsumer)
	<-r.run.Done()
	err := r.run.Err()
	if !errors.Is(err, jetstream.ErrConsumerDeleted) {
		t.Fatalf("Run = %v, want ErrConsumerDeleted", err)
	}
	m := regexp.MustCompile(`--deliver (\d+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("Run = %v, want it to name the stream sequence to resume from", err)
	}
	from, _ := strconv.ParseUint(m[1], 10, 64)
	if from < 1 || from > 6 {
		t.Fatalf("resume from stream sequence %d, want 1 to 6: every message after it unacknowledged or absent", from)
	}

	// Started again before it exists, it is refused, not created anew.
	runRefused(t, n, e, testConsumer, "missing", "--deliver")

	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy,
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: from, MaxDeliver: -1})
	r = start(t, cfg, e)
	publishAll(t, n, readings(7, "m1")[5:])
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "7" {
		t.Errorf("meter/m1 kwh = %s, want 7: each reading once", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A max_deliver set on a durable made elsewhere to start at a stream
// sequence (the way to resume after a deletion) is set back to unlimited
// too: the update keeps where the consumer starts, which the server
// cannot change.
func TestAMaxDeliverSetOnADurableMadeToStartAtASequenceIsSetBackToUnlimited(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(3, "m1"))
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy,
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: 2, MaxDeliver: -1})
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)

	setMaxDeliverAndWaitForItBack(t, n, logs)
	if logs.has("ERROR", "could not set it back") {
		t.Error("setting max_deliver back logged an error")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
