package mqtt3

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// TestNoAckOnALaterConnection holds a committed batch before its
// acknowledgements (the fault point), drops the connection under it, and
// lets the consumer acknowledge once the next connection is up and the
// broker has sent the same messages again under the same packet ids. A
// PUBACK of the first connection's deliveries written to the second would
// show there as a PUBACK for an id the second connection delivered once
// but acknowledged twice (or never delivered): every PUBACK of a
// connection must match a PUBLISH of that same connection, one for one.
func TestNoAckOnALaterConnection(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	px := startProxy(t, b.Addr())
	cfg := testConfig(t, px.URL())
	ev := &events{}
	cfg.Observer = ev
	rec := newRecorder(t)
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	first := true
	c.beforeAck = func(time.Time) { // on the consuming goroutine
		if first {
			first = false
			close(held)
			<-release
		}
	}
	r := startConsumer(t, c)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "s1", 10)
	<-held
	// The first connection delivered all ten (none is acknowledged: the
	// consumer is held on the first batch, the rest wait behind it).
	waitFor(t, "the ten deliveries of the first connection", 10*time.Second, func() bool { return ev.Sum(source.Received) == 10 })
	px.Cut()
	// The next connection is up and the broker sent the ten again.
	waitFor(t, "the redelivery on a new connection", 10*time.Second, func() bool {
		return len(px.Conns()) >= 2 && ev.Sum(source.Received) >= 20 && r.Ready()
	})
	close(release)
	waitFor(t, "the redelivered batch acknowledged", 10*time.Second, func() bool { return ev.Sum(source.Acked) >= 10 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := ev.Sum(source.AckDropped); got != 10 {
		t.Errorf("%d acknowledgements dropped, want the first connection's 10", got)
	}
	for i, pc := range px.Conns() {
		pubs, acks := pc.Record()
		delivered := map[uint16]int{}
		for _, id := range pubs {
			delivered[id]++
		}
		for _, id := range acks {
			if delivered[id] == 0 {
				t.Errorf("connection %d: PUBACK %d with no PUBLISH %d of its own left to acknowledge (publishes %v, pubacks %v)",
					i+1, id, id, pubs, acks)
			}
			delivered[id]--
		}
		t.Logf("connection %d: %d publishes, %d pubacks", i+1, len(pubs), len(acks))
	}
	if conns := px.Conns(); len(conns) < 2 {
		t.Fatalf("%d connections through the proxy, want 2", len(conns))
	}
	if _, acks := px.Conns()[0].Record(); len(acks) != 0 {
		t.Errorf("the first connection acknowledged %v before it was cut: the batch was held", acks)
	}
}
