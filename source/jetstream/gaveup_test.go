package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
)

// A max_deliver set on the server while replayguard runs, before its
// next reading sets it back, makes the server give up on the messages
// delivered that often and never acknowledged: here three that another
// member of the durable took and never acknowledged (killed, say). The
// server delivers them to nobody again; replayguard hears of each from
// the server's advisory and takes it from the stream by its sequence, so
// each is decided and applied once, its audit record carrying dup.
func TestAMessageTheServerGaveUpOnIsTakenFromTheStreamAndDecided(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: -1})
	publishAll(t, n, readings(3, "m1"))
	advisories := gaveUpAdvisories(t, n)
	fetchUnacknowledged(t, n, 3)

	e, st := meters(t)
	cfg := testConfig(t, n.URL()) // its reading of max_deliver comes after a minute
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	n.SetConsumerMaxDeliver(testStream, testConsumer, 1)
	for range 3 {
		select {
		case <-advisories:
		case <-time.After(3 * cfg.AckWait):
			t.Fatal("the server gave up on no message")
		}
	}
	waitFor(t, "the three readings applied", 10*time.Second, func() bool { return kwh(e, "m1") == "3" })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := redelivered(t, st); got != 3 {
		t.Errorf("%d audit records carry dup, want 3: each was delivered before", got)
	}
}

// gaveUpAdvisories subscribes to the server's advisories of the messages
// it gives up on for the test consumer.
func gaveUpAdvisories(t *testing.T, n *testbroker.NATS) <-chan *nats.Msg {
	t.Helper()
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ch := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+testStream+"."+testConsumer, ch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

// fetchUnacknowledged takes count messages of the test durable on a
// connection of its own and closes it without acknowledging them, as a
// member killed while it held them.
func fetchUnacknowledged(t *testing.T, n *testbroker.NATS, count int) {
	t.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, testStream, testConsumer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(count, natsjs.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range b.Messages() {
		got++
	}
	if got != count {
		t.Fatalf("fetched %d messages, want %d", got, count)
	}
}

// A message the server gave up on and replayguard took from the stream
// counts as received in the accounting of the stream's sequences: once
// the feed goes on and the ack floor passes it, the readings that follow
// do not tell it as a message the server passed over.
func TestAMessageTakenAfterTheServerGaveUpIsNotToldLost(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: -1})
	publishAll(t, n, readings(3, "m1"))
	advisories := gaveUpAdvisories(t, n)
	fetchUnacknowledged(t, n, 3)

	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	logs.lostExpected = true          // told below, with the events
	cfg.StreamCheck = 2 * cfg.AckWait // the first reading, which sets max_deliver back, after the server gave up
	events := &consumetest.Events{}
	cfg.Observer = events
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	n.SetConsumerMaxDeliver(testStream, testConsumer, 1)
	for range 3 {
		select {
		case <-advisories:
		case <-time.After(3 * cfg.AckWait):
			t.Fatal("the server gave up on no message")
		}
	}
	publishAll(t, n, readings(5, "m1")[3:])
	allAcked(t, n, 10*time.Second)
	waitFor(t, "the five readings applied", 10*time.Second, func() bool { return kwh(e, "m1") == "5" })
	// The first reading sets max_deliver back and keeps what it read; the
	// second compares with it, then sets back a max_deliver set again: its
	// warning shows that the comparison was made.
	waitFor(t, "the first reading", 3*cfg.StreamCheck, func() bool { return maxDeliverWarnings(logs) == 1 })
	n.SetConsumerMaxDeliver(testStream, testConsumer, 1)
	waitFor(t, "the second reading", 3*cfg.StreamCheck, func() bool { return maxDeliverWarnings(logs) == 2 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := events.Sum(source.Lost); got != 0 {
		t.Errorf("%d messages told lost, where each was decided: %q", got, lostLines(logs))
	}
}

// maxDeliverWarnings counts the warnings that the consumer's max_deliver
// was set on the server, one per reading that set it back.
func maxDeliverWarnings(logs *logBuffer) int {
	return strings.Count(logs.String(), "max_deliver was set on the server")
}

// A max_deliver set on the server before a start is set back to
// unlimited at the bind, with the same warning as at a check.
func TestAMaxDeliverSetBeforeAStartIsWarnedAboutAtTheBind(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: 3})
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if info, err := n.ConsumerInfo(testStream, testConsumer); err != nil || info.Config.MaxDeliver != -1 {
		t.Fatalf("consumer info = %+v, %v; want max_deliver set back to unlimited", info, err)
	}
	if lines := linesWith(logs, "level=WARN", "max_deliver was set on the server", "max_deliver=3", "when=bind"); len(lines) != 1 {
		t.Errorf("the max_deliver found at the bind told as %q, want one warning", lines)
	}
}
