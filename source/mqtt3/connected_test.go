package mqtt3

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// The first delivery of each MQTT 3.1.1 connection carries when it came
// up, the others none: a broker restarted at the same URL shows in the
// audit trail as a new connection, though the broker's URL is the same.
func TestTheFirstDeliveryOfEachConnectionCarriesItsTime(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, m.URL())
	ev := &events{}
	cfg.Observer = ev
	rec := newRecorder(t)
	start(t, cfg, rec).waitReady(t)
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "a", 5)
	waitFor(t, "5 commits", 10*time.Second, func() bool { return rec.Len() == 5 })
	m.Restart()
	waitFor(t, "a reconnect", 10*time.Second, func() bool { return ev.Sum(source.Connected) == 2 })
	if err := pub.AwaitConnection(t.Context()); err != nil {
		t.Fatal(err)
	}
	publish(t, pub, "b", 5)
	// Some "a" may come again (acknowledged too late for the broker's
	// save): the last "b" comes after them.
	waitFor(t, "the last message", 10*time.Second, func() bool { return rec.Count(key{Source: "b", Seq: 5}) > 0 })

	var stamped []time.Time
	for i, msg := range rec.Committed() {
		if msg.Connected.IsZero() {
			continue
		}
		if i != 0 && i != 5 {
			t.Errorf("delivery %d (%v) carries a connection time: only each connection's first may", i, keyOf(t, msg))
		}
		stamped = append(stamped, msg.Connected)
	}
	if len(stamped) != 2 || !stamped[1].After(stamped[0]) || stamped[0].Location() != time.UTC {
		t.Fatalf("connection times %v, want the two connections', in UTC, the second later", stamped)
	}
}

// A broker that accepts the connection and is slow to send its CONNACK
// does not make the connection look older than it is: the time the first
// delivery carries into the audit trail is when the CONNACK came, never
// when the CONNECT went out. The session is resumed with messages queued,
// which the broker delivers right behind the CONNACK, before paho's
// Connect returns.
func TestTheConnectionTimeIsTheConnacksNotTheConnects(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	p := startSlowProxy(t, m.Addr(), 1500*time.Millisecond)
	cfg := testConfig(t, p.URL())
	first := start(t, cfg, newRecorder(t))
	first.waitReady(t)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "a", 3) // queued in the session

	rec := newRecorder(t)
	start(t, cfg, rec)
	waitFor(t, "the queued messages", 10*time.Second, func() bool { return rec.Len() == 3 })
	conns := p.Conns()
	connack := conns[len(conns)-1].Connack()
	got := rec.Committed()[0].Connected
	if got.Before(connack) {
		t.Fatalf("the first delivery carries connection time %v, %v before the CONNACK was sent (%v): the CONNECT's time",
			got.Format(time.RFC3339Nano), connack.Sub(got).Round(time.Millisecond), connack.Format(time.RFC3339Nano))
	}
}
