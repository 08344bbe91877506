package jetstream_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

// A stream deleted while replayguard consumes it takes its durable consumer
// with it, and Run ends saying how to create the consumer again. A stream
// created again anew numbers its messages from 1: the ack floor of the
// stream that was deleted means nothing in it, and a consumer made to
// start there would pass over the new stream's first messages, never
// delivered nor told lost (they lie before its start). Following the
// advice of the error, every reading of the new stream is applied.
func TestAStreamDeletedAndCreatedAgainIsResumedFromItsFirstMessage(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg, _ := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	publishAll(t, n, readings(5, "m1"))
	allAcked(t, n, 10*time.Second)

	n.DeleteStream(testStream)
	<-r.run.Done()
	err := r.run.Err()
	if !errors.Is(err, jetstream.ErrConsumerDeleted) {
		t.Fatalf("Run = %v, want ErrConsumerDeleted", err)
	}
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(8, "m1")[5:])

	m := regexp.MustCompile(`--deliver (\S+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("Run = %v, want it to say where to create the consumer again", err)
	}
	cc := natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: -1}
	if m[1] != "all" {
		from, perr := strconv.ParseUint(m[1], 10, 64)
		if perr != nil {
			t.Fatalf("Run = %v: --deliver %q is neither all nor a sequence", err, m[1])
		}
		cc.DeliverPolicy, cc.OptStartSeq = natsjs.DeliverByStartSequencePolicy, from
	}
	durableMadeElsewhere(t, n, cc)
	r = start(t, cfg, e)
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "8" {
		t.Errorf("meter/m1 kwh = %s, want 8: the new stream's readings were passed over (Run said: %v)", got, err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A durable made to start at a stream sequence (the way to resume after a
// deletion) and deleted again before it acknowledged anything has an ack
// floor of 0 on the server: the sequence named to resume from is where it
// was made to start, never the stream's first message, which would
// deliver again what was decided before it (id routes' keys that have
// left the window since apply again).
func TestADurableMadeToStartAtASequenceAndDeletedIsResumedFromItsStart(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg := testConfig(t, n.URL())
	publishAll(t, n, readings(5, "m1"))
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy,
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: 6, MaxDeliver: -1})
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)

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
	if from, _ := strconv.ParseUint(m[1], 10, 64); from != 6 {
		t.Errorf("resume from stream sequence %d, want 6, where the consumer was made to start: %v", from, err)
	}
}

// A consumer deleted while Run consumes ends it saying where to create it
// again: after the ack floor, which Run reads every second between its
// checks (a minute apart by default). Read only at the bind, it named the
// stream's first message, before every message decided since: created so,
// the consumer delivered them again, and an id route's whose keys had
// left the window applied again.
func TestAConsumerDeletedWhileRunConsumesNamesTheFloorOfItsAcks(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg := testConfig(t, n.URL()) // StreamCheck a minute: the checks read nothing meanwhile
	r := start(t, cfg, e)
	publishAll(t, n, readings(10, "m1"))
	allAcked(t, n, 10*time.Second)
	waitFor(t, "the ack floor read", 10*time.Second, func() bool { return r.AckFloor() == 10 })

	n.DeleteConsumer(testStream, testConsumer)
	<-r.run.Done()
	err := r.run.Err()
	if !errors.Is(err, jetstream.ErrConsumerDeleted) || !strings.Contains(err.Error(), "--deliver 11") {
		t.Fatalf("Run = %v, want it to say to create the consumer from stream sequence 11, after the 10 acknowledged", err)
	}
}
