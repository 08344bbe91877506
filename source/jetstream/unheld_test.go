package jetstream_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A process that received messages and died without acknowledging them
// leaves them pending on the server until their AckWait runs out; a
// consumer started meanwhile gets none of them, and, with MaxAckPending
// reached, nothing at all. It says so at once, with how many and for how
// long, rather than sit idle with no word; and the messages then come.
func TestMessagesAGoneConsumerLeftUnacknowledgedAreReportedAtStart(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(40, "m1"))
	cfg := testConfig(t, n.URL())
	cfg.BatchSize, cfg.MaxAckPending = 8, 10
	nc, js := n.JetStream()
	gone, err := js.CreateOrUpdateConsumer(context.Background(), testStream, natsjs.ConsumerConfig{Durable: testConsumer,
		AckPolicy: natsjs.AckExplicitPolicy, DeliverPolicy: natsjs.DeliverAllPolicy, AckWait: cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending, MaxDeliver: -1})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := gone.Fetch(cfg.MaxAckPending, natsjs.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range batch.Messages() {
		got++
	}
	nc.Close()
	if got != cfg.MaxAckPending {
		t.Fatalf("fetched %d messages, want %d", got, cfg.MaxAckPending)
	}

	var logs testbroker.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e, _ := meters(t)
	r := start(t, cfg, e)
	waitFor(t, "a warning naming the messages left pending, well before their ack_wait", 2*time.Second, func() bool {
		s := logs.String()
		return strings.Contains(s, "jetstream.ack_wait") && strings.Contains(s, "messages=10") && strings.Contains(s, "max_ack_pending is reached")
	})
	waitFor(t, "every reading applied once the server delivered them again", 20*time.Second, func() bool { return kwh(e, "m1") == "40" })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
