package forward_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func mqttOutput(t *testing.T, broker *testbroker.Mosquitto, inFlight int) *forward.MQTT {
	t.Helper()
	out, err := forward.NewMQTT(forward.MQTTOptions{Brokers: []string{broker.URL()}, ClientID: testbroker.UniqueClientID("rg-out"),
		InFlight: inFlight, AckTimeout: 5 * time.Second, ConnectTimeout: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMQTTForwardsEachAppliedMessageWithItsKeyInOrderPerSource forwards a
// feed of three sources, with replays, through a broker restart while
// publishes are in flight: the
// downstream subscriber receives every applied message, byte for byte,
// carrying its key and identity, in commit order per source; keying on
// replayguard-key it sees each exactly once, and nothing else.
func TestMQTTForwardsEachAppliedMessageWithItsKeyInOrderPerSource(t *testing.T) {
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	r := newRig(t, engine.ForwardSpec{Topic: "clean/{topic}"}, map[string]forward.Output{engine.OutputMQTT: mqttOutput(t, broker, 16)},
		forward.Options{Batch: 50, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	r.run()
	ctx := context.Background()
	applied := map[string]engine.Message{} // by key
	order := map[string][]string{}         // keys per source, in commit order
	decide := func(from, to int) {
		var batch []engine.Message
		for s := from; s <= to; s++ {
			m := incident(fmt.Sprintf("e%d", s%3), s)
			batch = append(batch, m, m) // every message twice: the copy is a duplicate
		}
		decs, err := r.eng.Process(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range decs {
			if d.Outcome == engine.Applied {
				applied[d.Key.String()] = batch[i]
				order[d.Source[1]] = append(order[d.Source[1]], d.Key.String())
			}
		}
	}
	decide(1, 300)
	waitFor(t, "the first part is delivered", func() bool { return len(sub.Messages()) >= 300 })
	decide(301, 3000)
	waitFor(t, "the second part is being delivered", func() bool { return len(sub.Messages()) >= 1000 })
	broker.Stop() // publishes in flight lose their PUBACK; what comes meanwhile waits in the outbox
	decide(3001, 3300)
	time.Sleep(300 * time.Millisecond)
	broker.Restart()
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	waitFor(t, "the subscriber has every applied message", func() bool { return len(firstByKey(sub.Messages())) >= 3300 })

	got := sub.Messages()
	firsts := firstByKey(got)
	if len(applied) != 3300 || len(firsts) != 3300 {
		t.Fatalf("%d applied, %d distinct keys received", len(applied), len(firsts))
	}
	seen := map[string][]string{}
	for _, m := range firsts {
		key := m.User[forward.HeaderKey]
		want, ok := applied[key]
		if !ok {
			t.Fatalf("received key %s that no applied decision has: %+v", key, m)
		}
		if m.Topic != "clean/"+want.Topic || string(m.Payload) != string(want.Payload) {
			t.Fatalf("key %s arrived on %s as %s; want %s, %s", key, m.Topic, m.Payload, "clean/"+want.Topic, want.Payload)
		}
		src := strings.TrimPrefix(want.Topic, "incidents/fd/")
		if m.User[forward.HeaderRoute] != "incidents" || m.User[forward.HeaderSource] != fmt.Sprintf(`["fd","%s"]`, src) ||
			m.User[forward.HeaderEpoch] != "1" || m.User[forward.HeaderSequence] == "" {
			t.Fatalf("user properties %v", m.User)
		}
		seen[src] = append(seen[src], key)
	}
	for src, keys := range order {
		if strings.Join(seen[src], ",") != strings.Join(keys, ",") {
			t.Fatalf("source %s: keys arrived out of commit order", src)
		}
	}
	t.Logf("%d copies received for %d keys (%d sent again after the broker restart)", len(got), len(firsts), len(got)-len(firsts))
}

// firstByKey keeps the first copy of each replayguard-key, in arrival order.
func firstByKey(msgs []testbroker.Received) []testbroker.Received {
	seen := map[string]bool{}
	var out []testbroker.Received
	for _, m := range msgs {
		if k := m.User[forward.HeaderKey]; !seen[k] {
			seen[k] = true
			out = append(out, m)
		}
	}
	return out
}

// TestMQTTHoldsACopyOverTheBrokersMaximumPacketSize forwards a message whose
// copy is larger than the Maximum Packet Size the broker's CONNACK gives:
// a broker closes the connection of a client that sends one, so sending it
// again would stall the lane for good. It is held for an operator with an
// audit record that says why, and the entries after it are delivered.
func TestMQTTHoldsACopyOverTheBrokersMaximumPacketSize(t *testing.T) {
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Extra: []string{"max_packet_size 2048"}})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	r := newRig(t, engine.ForwardSpec{Topic: "clean/{topic}"}, map[string]forward.Output{engine.OutputMQTT: mqttOutput(t, broker, 16)},
		forward.Options{Batch: 50, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	r.run()
	ctx := context.Background()
	big := engine.Message{Topic: "incidents/fd/e1", Payload: fmt.Appendf(nil,
		`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":3,"note":%q}`, strings.Repeat("n", 2100))}
	batch := []engine.Message{incident("e1", 1), incident("e1", 2), big, incident("e1", 4), incident("e1", 5)}
	keys := r.keys(ctx, batch...)
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	waitFor(t, "the four others are delivered", func() bool { return len(firstByKey(sub.Messages())) >= 4 })

	var got []string
	for _, m := range firstByKey(sub.Messages()) {
		got = append(got, m.User[forward.HeaderSequence])
	}
	if strings.Join(got, " ") != "1 2 4 5" {
		t.Fatalf("sequences delivered: %v, want 1 2 4 5", got)
	}
	held, _ := r.store.OutboxHeld(ctx)
	if len(held) != 1 || held[0].Key.String() != keys[2] || !strings.Contains(held[0].Reason, "over the Maximum Packet Size 2048") {
		t.Fatalf("held: %+v", held)
	}
	var rec *engine.AuditRecord
	r.store.ScanAudit(ctx, 1, func(a engine.AuditRecord) error {
		if a.Outcome == engine.OutcomeForwardHeld {
			rec = &a
		}
		return nil
	})
	if rec == nil || rec.Ref != held[0].ID || !strings.Contains(rec.Reason, "Maximum Packet Size") {
		t.Fatalf("audit record of the hold: %+v", rec)
	}
	if strings.Contains(broker.Log(), "oversize packet") {
		t.Fatalf("the broker was sent the oversize copy:\n%s", broker.Log())
	}
}

// A broker that speaks MQTT 3.1.1 only (NATS's MQTT listener) closes the
// connection on the output's MQTT 5 CONNECT: the error says the output
// speaks MQTT 5 only, not a bare EOF.
func TestMQTTOutputToABrokerOfMQTT311OnlySaysWhy(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{MQTT: true})
	out, err := forward.NewMQTT(forward.MQTTOptions{Brokers: []string{n.MQTTURL()}, ClientID: testbroker.UniqueClientID("rg-out"),
		InFlight: 1, AckTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	got, err := out.Deliver(t.Context(), []engine.OutboxEntry{{ID: 1, Target: "clean/x", Payload: []byte(`{}`)}})
	if got != 0 || err == nil || !strings.Contains(err.Error(), "the output speaks MQTT 5 only") {
		t.Fatalf("Deliver to an MQTT 3.1.1 broker = %d, %v; want an error saying the output speaks MQTT 5 only", got, err)
	}
}

// TestMQTTHoldsACopyTheBrokerClosesTheConnectionOn: a broker that refuses
// a publish by closing the connection (Mosquitto, on a topic of more than
// 201 levels: DISCONNECT 0x82) does it at every attempt, and the entries
// behind it would wait for good. The connection's reset can take the
// PUBACKs of the copies before it along, so what was in flight goes again
// one at a time: the second attempt's error, which readiness and the log
// show, names the copy the broker stops at, alone in flight, and the third
// holds it for an operator, saying why; the copies before and after it are
// delivered.
func TestMQTTHoldsACopyTheBrokerClosesTheConnectionOn(t *testing.T) {
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	out := mqttOutput(t, broker, 16)
	defer out.Close()
	deep := "clean" + strings.Repeat("/x", 205)
	entries := []engine.OutboxEntry{
		{ID: 1, Target: "clean/a", Payload: []byte(`{"n":1}`)},
		{ID: 2, Target: deep, Payload: []byte(`{"n":2}`)},
		{ID: 3, Target: "clean/b", Payload: []byte(`{"n":3}`)},
	}
	delivered := 0
	for attempt := 1; attempt <= 2; attempt++ {
		got, err := out.Deliver(t.Context(), entries[delivered:])
		delivered += got
		var ref *forward.RefusedError
		if err == nil || errors.As(err, &ref) {
			t.Fatalf("attempt %d: Deliver = %d, %v; want an error that holds nothing yet", attempt, got, err)
		}
		// The DISCONNECT is said when it was read before the connection's
		// reset, which the publishes written after it may cause.
		if strings.Contains(err.Error(), "DISCONNECT") && !strings.Contains(err.Error(), "DISCONNECT of reason code 0x82 (protocol error)") {
			t.Errorf("attempt %d: error %q misreads the broker's DISCONNECT", attempt, err)
		}
		if attempt == 2 && (delivered != 1 || !strings.Contains(err.Error(),
			`reason code 0x82 (protocol error) with 1 publishes awaiting PUBACK, the oldest to topic "clean/x/x/x`)) {
			t.Fatalf("attempt 2: %d delivered in all, error %q; want 1, and the error naming the deep topic alone in flight", delivered, err)
		}
	}
	got, err := out.Deliver(t.Context(), entries[delivered:])
	var ref *forward.RefusedError
	if got != 0 || !errors.As(err, &ref) || ref.Index != 0 ||
		!strings.Contains(ref.Reason, `alone in flight, twice in a row: DISCONNECT reason code 0x82 (protocol error) for topic "clean/x/x/x`) {
		t.Fatalf("attempt 3: Deliver = %d, %v; want the deep copy refused, saying why", got, err)
	}
	if got, err := out.Deliver(t.Context(), entries[delivered+1:]); got != 1 || err != nil {
		t.Fatalf("the copy after the held one: Deliver = %d, %v; want it delivered", got, err)
	}
	// clean/a may come twice, sent again when the reset took its PUBACK:
	// the wait is for each topic once, not for two messages.
	topics := func() []string {
		var ts []string
		for _, m := range sub.Messages() {
			if !slices.Contains(ts, m.Topic) {
				ts = append(ts, m.Topic)
			}
		}
		return ts
	}
	waitFor(t, "the two others reach the subscriber", func() bool { return slices.Contains(topics(), "clean/b") })
	if topics := topics(); strings.Join(topics, " ") != "clean/a clean/b" {
		t.Fatalf("received %v; want clean/a clean/b", topics)
	}
}
