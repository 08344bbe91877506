package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// statusLookalikes are stream messages a producer may publish that look
// like a server's status messages to a pull: no payload, a Status header
// (with the Description the server would give it), named by what a
// server's would mean.
var statusLookalikes = []struct {
	name   string
	header nats.Header
}{
	{"bad request", nats.Header{"Status": {"400"}, "Description": {"Bad Request"}}},
	{"consumer deleted", nats.Header{"Status": {"409"}, "Description": {"Consumer Deleted"}}},
	{"leadership change", nats.Header{"Status": {"409"}, "Description": {"Leadership Change"}}},
	{"request timeout", nats.Header{"Status": {"408"}, "Description": {"Request Timeout"},
		"Nats-Pending-Messages": {"1"}, "Nats-Pending-Bytes": {"0"}}},
	{"no messages", nats.Header{"Status": {"404"}, "Description": {"No Messages"}}},
	{"no responders", nats.Header{"Status": {"503"}}},
	{"idle heartbeat", nats.Header{"Status": {"100"}, "Description": {"Idle Heartbeat"}}},
	{"a status no server sends", nats.Header{"Status": {"online"}}},
}

// publishEmpty publishes a message with header h and no payload to
// subject, and waits for the stream's ack.
func publishEmpty(t testing.TB, n *testbroker.NATS, subject string, h nats.Header) {
	t.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h}); err != nil {
		t.Fatalf("publish %v: %v", h, err)
	}
}

// A stream message with no payload and a Status header, which any
// producer may publish, is a message like any other, not a server status:
// handed over, decided by the engine (malformed here: no reading in it,
// so held in quarantine with an audit record), and acknowledged after its
// commit. It neither ends Run (a "400" or "409 Consumer Deleted" did, on
// every start: the feed stalled) nor goes undecided and unacknowledged,
// delivered again every AckWait for ever, each copy holding a
// MaxAckPending slot.
func TestStatusLookalikeMessagesAreDecidedAndAcknowledged(t *testing.T) {
	for _, tc := range statusLookalikes {
		t.Run("a message that looks like "+tc.name, func(t *testing.T) {
			n := testbroker.StartNATS(t, testbroker.NATSOptions{})
			n.CreateStream(testStream, "plant.>")
			e, st := meters(t)
			rec := newRecorder(e)
			msgs := readings(20, "m1")
			publishAll(t, n, msgs[:10])
			publishEmpty(t, n, "plant.m9.energy", tc.header)
			publishAll(t, n, msgs[10:])
			c := start(t, testConfig(t, n.URL()), rec)
			consuming := func(cond func() bool) func() bool {
				return func() bool {
					select {
					case <-c.run.Done():
						t.Fatalf("Run returned %v while consuming", c.run.Err())
					default:
					}
					return cond()
				}
			}
			waitFor(t, "every message decided", 10*time.Second, consuming(func() bool {
				return rec.count(engine.Applied)+rec.count(engine.Malformed) >= len(msgs)+1
			}))
			waitFor(t, "every message acknowledged on the server", 10*time.Second, consuming(func() bool {
				info, err := n.ConsumerInfo(testStream, testConsumer)
				return err == nil && info.NumPending == 0 && info.NumAckPending == 0
			}))
			if got := kwh(e, "m1"); got != "20" {
				t.Errorf("meter/m1 kwh = %s, want 20", got)
			}
			var held []engine.AuditRecord
			err := st.ScanAudit(context.Background(), 0, func(r engine.AuditRecord) error {
				if r.Outcome == "malformed" {
					held = append(held, r)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(held) != 1 || held[0].Topic != "plant/m9/energy" || held[0].Reason == "" {
				t.Errorf("malformed audit records %+v, want one for plant/m9/energy with its reason", held)
			} else {
				t.Logf("decided malformed: %s", held[0].Reason)
			}
			if !c.Ready() {
				t.Error("not ready after the message")
			}
			if err := c.stop(); err != nil {
				t.Fatalf("Run = %v", err)
			}
		})
	}
}
