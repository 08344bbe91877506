package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
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
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxWaiting: 1})
	e, _ := meters(t)
	runRefused(t, n, e, testConsumer, "can not be updated")
}

// A push consumer of the same name (one with a deliver subject) can never
// be pulled from: Run ends with ErrStream naming the consumer and saying
// so, rather than a bind retried for ever while Ready says no.
func TestAPushConsumerOfTheSameNameIsRefused(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, DeliverSubject: "deliver." + testConsumer})
	e, _ := meters(t)
	runRefused(t, n, e, testConsumer, "push consumer")
}

// A durable consumer an operator created to start at a chosen stream
// sequence (after replayguard's was deleted: a new one would deliver the
// stream again from its first message, and an id route's messages whose
// keys have left the window would apply twice) is bound as it is, its
// start kept: the server cannot change it, and it mattered only at its
// creation.
func TestADurableMadeToStartAtASequenceIsBoundAsItIs(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(5, "m1"))
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy,
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: 4, MaxDeliver: -1})
	e, _ := meters(t)
	r := start(t, testConfig(t, n.URL()), e)
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "2" {
		t.Errorf("meter/m1 kwh = %s, want 2: the readings from stream sequence 4 on", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// durableMadeElsewhere creates the tests' durable consumer on n as an
// operator or another program would, with cfg.
func durableMadeElsewhere(t *testing.T, n *testbroker.NATS, cfg natsjs.ConsumerConfig) {
	t.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	cfg.Durable = testConsumer
	if _, err := js.CreateOrUpdateConsumer(context.Background(), testStream, cfg); err != nil {
		t.Fatal(err)
	}
}

// runRefused runs a consumer of the tests' configuration on n into e and
// requires Run to end within 10 s with ErrStream, its text holding every
// one of words.
func runRefused(t *testing.T, n *testbroker.NATS, e *engine.Engine, words ...string) {
	t.Helper()
	c, err := jetstream.New(testConfig(t, n.URL()), e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, jetstream.ErrStream) {
		t.Fatalf("Run = %v, want ErrStream", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("Run = %v, want ErrStream saying %q", err, w)
		}
	}
}
