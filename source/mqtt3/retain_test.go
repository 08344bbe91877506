package mqtt3

import (
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// publishRetained publishes payload to topic at QoS 1 with the retain flag.
func publishRetained(t testing.TB, url, topic string, payload []byte) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetProtocolVersion(protocolVersion).
		SetClientID(testbroker.UniqueClientID("rg-retain")))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Publish(topic, 1, true, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
}

// TestReconnectInAShareGroupDoesNotResendRetained: MQTT 3.1.1 has no retain
// handling, so every SUBSCRIBE makes the broker send the filter's retained
// messages again. A share group's member renews its $share subscriptions
// on every connection (a restored session may lack them); a plain
// (Unshared) filter of the same member is in the present session already,
// and renewing it too would replay its retained messages into the engine
// at every reconnect, long after their keys may have left the window.
func TestReconnectInAShareGroupDoesNotResendRetained(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	publishRetained(t, b.URL(), "replayguard/test/r", testbroker.DefaultPayload("r", 1))
	px := startProxy(t, b.Addr())
	cfg := testConfig(t, px.URL())
	cfg.ShareGroup = "grp"
	cfg.Filters = []Filter{{Topic: testFilter, QoS: 1, Unshared: true}, {Topic: "replayguard/shared/#", QoS: 1}}
	ev := &events{}
	cfg.Observer = ev
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	retained := key{Source: "r", Seq: 1}
	waitFor(t, "the retained message on the first subscription", 10*time.Second, func() bool { return rec.Count(retained) == 1 })
	const reconnects = 3
	for i := 2; i <= reconnects+1; i++ {
		px.Cut()
		waitFor(t, "a reconnect", 10*time.Second, func() bool { return ev.Sum(source.Connected) >= i && r.Ready() })
	}
	time.Sleep(200 * time.Millisecond) // a resent retained message arrives right after the SUBACK
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	// A cut before its PUBACK reached the broker has it sent again, rightly,
	// with the DUP flag; a SUBSCRIBE sends it afresh, without.
	fresh := 0
	for _, m := range rec.Committed() {
		if m.Topic == "replayguard/test/r" && !m.Dup {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("the retained message was sent afresh %d times over %d connections of one session (%d deliveries in all), want once",
			fresh, reconnects+1, rec.Count(retained))
	}
}
