package mqtt_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// The first delivery of each connection carries when it came up, the
// others none: a broker restarted at the same URL shows in the audit trail
// as a new connection, though the broker's URL is the same.
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
