package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

// A durable consumer created elsewhere with a setting the server cannot
// change (here its max waiting pulls) ends Run with ErrStream naming the
// consumer and the setting, rather than a bind retried for ever while
// Ready says no.
func TestADurableTheServerCannotUpdateIsRefused(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(context.Background(), testStream, natsjs.ConsumerConfig{Durable: testConsumer,
		AckPolicy: natsjs.AckExplicitPolicy, MaxWaiting: 1}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	e, _ := meters(t)
	c, err := jetstream.New(testConfig(t, n.URL()), e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), testConsumer) || !strings.Contains(err.Error(), "can not be updated") {
		t.Fatalf("Run = %v, want ErrStream naming the consumer and what cannot be updated", err)
	}
}

// A push consumer of the same name (one with a deliver subject) can never
// be pulled from: Run ends with ErrStream naming the consumer and saying
// so, rather than a bind retried for ever while Ready says no.
func TestAPushConsumerOfTheSameNameIsRefused(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(context.Background(), testStream, natsjs.ConsumerConfig{Durable: testConsumer,
		AckPolicy: natsjs.AckExplicitPolicy, DeliverSubject: "deliver." + testConsumer}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	e, _ := meters(t)
	c, err := jetstream.New(testConfig(t, n.URL()), e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), testConsumer) || !strings.Contains(err.Error(), "push consumer") {
		t.Fatalf("Run = %v, want ErrStream naming the consumer as a push consumer", err)
	}
}
