package forward_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/metrics"
)

// TestANATSEntryIsCountedDeliveredAsItsPubAckComes: of a page of seven,
// the fourth goes to a subject whose PubAck the server holds back (a
// responder that answers when the test says). The three before it have
// their PubAcks: they are counted delivered (the metric, the lane's
// status) while the fourth waits, not when the page ends, which a stalled
// PubAck puts off by the whole ack timeout (or for ever, on a failure).
func TestANATSEntryIsCountedDeliveredAsItsPubAckComes(t *testing.T) {
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
	ctx := context.Background()
	if _, err := jetStreamOf(t, srv).CreateStream(ctx, jetstream.StreamConfig{Name: "DISPATCH", Subjects: []string{"dispatch.fd.>"},
		Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	asked, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	if _, err := nc.Subscribe("dispatch.slow.>", func(m *nats.Msg) {
		if once.CompareAndSwap(false, true) {
			close(asked)
		}
		<-release
		m.Respond([]byte(`{"stream":"SLOW","seq":1}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewForward(reg, engine.OutputNATS)
	r := newRig(t, engine.ForwardSpec{NATS: "dispatch.{agency}.{source_id}"}, map[string]forward.Output{engine.OutputNATS: out},
		forward.Options{Observer: m})
	var page []engine.Message
	for seq := 1; seq <= 7; seq++ {
		msg := incident("e1", seq)
		if seq == 4 {
			msg = engine.Message{Topic: "incidents/slow/e1",
				Payload: fmt.Appendf(nil, `{"agency":"slow","source_id":"e1","boot_id":1,"sequence":%d}`, seq)}
		}
		page = append(page, msg)
	}
	r.keys(ctx, page...) // one page of seven, in the outbox before the drainer reads it
	r.run()

	<-asked
	delivered := func() float64 { return forwardedValue(t, reg, engine.OutputNATS, metrics.ForwardDelivered) }
	deadline := time.Now().Add(10 * time.Second)
	for delivered() != 3 || r.d.Status().Outputs[0].Delivered != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("while the fourth entry's PubAck is held back: %v entries counted delivered (lane status %d), want the three acknowledged",
				delivered(), r.d.Status().Outputs[0].Delivered)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	released = true
	waitFor(t, "the page is delivered", func() bool { return delivered() == 7 })
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
}

// TestAnMQTTEntryIsCountedDeliveredAsItsPUBACKComes: a page of 2,000 goes
// one publish at a time (a broker that takes one in flight), and the broker
// freezes once the downstream has the third copy, while the page is under
// way. The output had the second copy's PUBACK before it sent the third:
// at least two are counted delivered (the metric, the lane's status) while
// the broker is frozen, not none until the page ends, which the frozen
// broker puts off by the whole ack timeout.
func TestAnMQTTEntryIsCountedDeliveredAsItsPUBACKComes(t *testing.T) {
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	out, err := forward.NewMQTT(forward.MQTTOptions{Brokers: []string{broker.URL()}, ClientID: testbroker.UniqueClientID("rg-out"),
		InFlight: 1, AckTimeout: time.Minute, ConnectTimeout: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewForward(reg, engine.OutputMQTT)
	const n = 2000
	r := newRig(t, engine.ForwardSpec{Topic: "clean/{topic}"}, map[string]forward.Output{engine.OutputMQTT: out},
		forward.Options{Observer: m, Batch: n})
	var page []engine.Message
	for seq := 1; seq <= n; seq++ {
		page = append(page, incident("e1", seq))
	}
	ctx := context.Background()
	r.keys(ctx, page...) // one page, in the outbox before the drainer reads it
	r.run()

	waitFor(t, "the downstream has the third copy", func() bool { return len(sub.Messages()) >= 3 })
	broker.Pause()
	resumed := false
	defer func() {
		if !resumed {
			broker.Resume()
		}
	}()
	delivered := func() float64 { return forwardedValue(t, reg, engine.OutputMQTT, metrics.ForwardDelivered) }
	if got := delivered(); got == n {
		t.Fatalf("the page of %d was delivered before the broker froze: nothing to tell", n)
	} else if got < 2 || r.d.Status().Outputs[0].Delivered < 2 {
		t.Fatalf("while the broker is frozen mid-page: %v entries counted delivered (lane status %d), want at least the two whose PUBACKs came",
			got, r.d.Status().Outputs[0].Delivered)
	}
	broker.Resume()
	resumed = true
	waitFor(t, "the page is delivered", func() bool { return delivered() == n })
	waitFor(t, "the outbox is empty", func() bool { d, _ := r.store.OutboxDepth(ctx, ""); return d == 0 })
}
