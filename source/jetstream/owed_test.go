package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
)

// ackedAboveTheFloor makes the test durable (ack wait w) deliver the
// first count readings of m1 to a client of its own that acknowledges all
// but the first two, as a process whose first acknowledgements a server
// crash lost: the server's ack floor stays at 0, with 3 to count
// acknowledged above it and 1 and 2 ack pending.
func ackedAboveTheFloor(t *testing.T, n *testbroker.NATS, count int, w time.Duration, deleted ...uint64) {
	t.Helper()
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: -1, AckWait: w})
	publishAll(t, n, readings(count, "m1"))
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, testStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range deleted { // before the server reaches them: never delivered
		if err := stream.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.Consumer(ctx, testStream, testConsumer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(count-len(deleted), natsjs.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range b.Messages() {
		if i++; i > 2 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	info, err := n.ConsumerInfo(testStream, testConsumer)
	if err != nil || info.AckFloor.Stream != 0 || info.NumAckPending != 2 || info.Delivered.Stream != uint64(count) {
		t.Fatalf("consumer info = %+v, %v; want ack floor 0, 2 ack pending, %d delivered", info, err, count)
	}
}

// Messages the server delivered before a start and saw acknowledged
// above its ack floor were decided by the process before: the consumer
// that binds then, and receives only the ack pending ones again, tells
// none of the others lost, neither once the floor passes them nor when
// the stream is deleted.
func TestMessagesAcknowledgedAboveTheFloorBeforeAStartAreNotToldLost(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	ackedAboveTheFloor(t, n, 10, time.Second)
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL()) // fails the test on a line telling messages never received
	cfg.AckWait = time.Second
	events := &consumetest.Events{}
	cfg.Observer = events
	r := start(t, cfg, e)
	allAcked(t, n, 10*time.Second) // 1 and 2 delivered again
	publishAll(t, n, readings(15, "m1")[10:])
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "7" {
		t.Fatalf("meter/m1 kwh = %s, want 7: readings 1, 2 and 11 to 15 here", got)
	}
	if info, err := n.ConsumerInfo(testStream, testConsumer); err != nil || info.AckFloor.Stream != 15 {
		t.Fatalf("consumer info = %+v, %v; want the ack floor at 15", info, err)
	}
	time.Sleep(10 * cfg.StreamCheck) // checks reading the floor past 3 to 10, each told of one check later
	n.DeleteStream(testStream)
	<-r.run.Done()
	if got := events.Sum(source.Lost); got != 0 {
		t.Errorf("%d messages counted lost, want none:\n%s", got, logs)
	}
}

// Of the messages the server delivered before a start, the ack pending
// ones can be lost: a purge before the server delivers them again takes
// them. The server does not tell which they are among those after its
// ack floor, so the consumer tells them as at most that many, not as
// every sequence it never received.
func TestAckPendingMessagesAPurgeTakesBeforeTheyComeAgainAreToldAsAtMostThatMany(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	ackedAboveTheFloor(t, n, 10, time.Minute)
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	logs.lostExpected = true
	cfg.AckWait = time.Minute
	events := &consumetest.Events{}
	cfg.Observer = events
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if got := n.PurgeStream(testStream); got != 10 {
		t.Fatalf("purged %d messages, want 10", got)
	}
	publishAll(t, n, readings(12, "m1")[10:])
	allAcked(t, n, 10*time.Second)
	waitFor(t, "the messages lost told", 10*time.Second, func() bool { return events.Sum(source.Lost) > 0 })
	time.Sleep(10 * cfg.StreamCheck) // no more is told
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := events.Sum(source.Lost); got != 2 {
		t.Errorf("%d messages counted lost, want 2, the ack pending ones:\n%s", got, logs)
	}
	lines := linesWith(logs, "level=ERROR", "held unacknowledged (ack pending at the bind)")
	if len(lines) != 1 || !strings.Contains(lines[0], "from_sequence=1 through_sequence=10 messages_at_most=2 ") {
		t.Errorf("the purge told as %q, want one error: stream sequences 1 to 10, at most 2 messages", lines)
	}
}

// A message the stream deleted before the server delivered it, between
// the ack floor and the last delivery, was passed over, never decided:
// the server counts it neither acknowledged nor pending. Once the pending
// ones came again, it is still told, as at most one message.
func TestAMessagePassedOverBelowTheLastDeliveryBeforeAStartIsStillTold(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	ackedAboveTheFloor(t, n, 10, time.Second, 5)
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	logs.lostExpected = true
	cfg.AckWait = time.Second
	events := &consumetest.Events{}
	cfg.Observer = events
	r := start(t, cfg, e)
	allAcked(t, n, 10*time.Second) // 1 and 2 delivered again
	waitFor(t, "the message passed over told", 10*time.Second, func() bool { return events.Sum(source.Lost) > 0 })
	time.Sleep(10 * cfg.StreamCheck) // no more is told
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := events.Sum(source.Lost); got != 1 {
		t.Errorf("%d messages counted lost, want 1, the one deleted before its delivery:\n%s", got, logs)
	}
	if lines := linesWith(logs, "level=ERROR", "messages_at_most=1 "); len(lines) != 1 {
		t.Errorf("the message passed over told as %q, want one error, at most 1 message", lines)
	}
}
