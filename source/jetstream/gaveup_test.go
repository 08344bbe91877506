package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
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
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
