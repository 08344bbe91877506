package forward_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// refusalEntries are 40 entries to clean/ok, the fifth to clean/denied.
func refusalEntries() []engine.OutboxEntry {
	entries := make([]engine.OutboxEntry, 40)
	for i := range entries {
		e := &entries[i]
		e.ID, e.Target, e.Route, e.Sequence = uint64(i+1)<<8, "clean/ok", "incidents", int64(i+1)
		e.Payload = fmt.Appendf(nil, `{"n":%d}`, i+1)
		e.Key[0] = byte(i + 1)
	}
	entries[4].Target = "clean/denied"
	return entries
}

// deliverRefusal has out deliver refusalEntries as the drainer
// does: the fifth is refused for good, with reason, and the call after it,
// with the entries behind it, delivers them all, at once. A last copy then
// shows, once received, that the broker forwarded all before it: the
// subscriber must have each copy but the refused one once, in order.
func deliverRefusal(t *testing.T, out *forward.MQTT, received func() []string, reason string) {
	t.Helper()
	entries := refusalEntries()
	got, err := out.Deliver(t.Context(), entries)
	var ref *forward.RefusedError
	if got != 4 || !errors.As(err, &ref) || ref.Index != 4 || !strings.Contains(ref.Reason, reason) {
		t.Fatalf("Deliver = %d, %v; want 4 delivered and the fifth refused: %s", got, err, reason)
	}
	if got, err := out.Deliver(t.Context(), entries[5:]); got != len(entries)-5 || err != nil {
		t.Fatalf("Deliver of the entries after the held one = %d, %v; want all %d", got, err, len(entries)-5)
	}
	last := engine.OutboxEntry{ID: 41 << 8, Target: "clean/ok", Route: "incidents", Sequence: 41, Payload: []byte(`{"n":41}`)}
	last.Key[0] = 41
	if got, err := out.Deliver(t.Context(), []engine.OutboxEntry{last}); got != 1 || err != nil {
		t.Fatalf("Deliver of the last copy = %d, %v", got, err)
	}
	waitFor(t, "the last copy reaches the subscriber", func() bool {
		r := received()
		return len(r) > 0 && r[len(r)-1] == "41"
	})
	var want []string
	for i := 1; i <= 41; i++ {
		if i != 5 {
			want = append(want, fmt.Sprint(i))
		}
	}
	if got := strings.Join(received(), ","); got != strings.Join(want, ",") {
		t.Fatalf("the subscriber received sequences\n%s\nwant each once, in order, without 5:\n%s", got, strings.Join(want, ","))
	}
}

// denyHook is a broker's ACL that denies publishing to clean/denied.
type denyHook struct{ mochi.HookBase }

func (*denyHook) ID() string { return "deny-clean-denied" }

func (*denyHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (*denyHook) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }

func (*denyHook) OnACLCheck(_ *mochi.Client, topic string, write bool) bool {
	return !write || topic != "clean/denied"
}

// A broker whose ACL denies a copy's topic may answer PUBACK 0x87 (not
// authorized) and keep the connection, as mochi-mqtt does, taking the
// copies written after it. The copy is refused for good; the copies in
// flight behind it keep their place: the next call, with the entries
// after the refused one, waits for their PUBACKs instead of publishing
// them again, which sent every subscriber a second copy of each, for
// every refused entry.
func TestMQTTDoesNotSendAgainTheCopiesInFlightBehindOneTheBrokerRefuses(t *testing.T) {
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(denyHook), nil); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "t", Address: addr})); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	url := "tcp://" + addr
	sub := testbroker.NewSubscriber(t, []string{url}, "clean/#")
	out, err := forward.NewMQTT(forward.MQTTOptions{Brokers: []string{url}, ClientID: testbroker.UniqueClientID("rg-out"),
		InFlight: 64, AckTimeout: 5 * time.Second, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// mochi passes no user properties on: the payload says which copy.
	deliverRefusal(t, out, func() []string {
		var seqs []string
		for _, m := range sub.Messages() {
			var p struct{ N int }
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatalf("payload %q: %v", m.Payload, err)
			}
			seqs = append(seqs, fmt.Sprint(p.N))
		}
		return seqs
	}, "mqtt PUBACK reason code 0x87 (not authorized)")
}
