package forward_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// Mosquitto closes the connection just after a PUBACK 0x87 (its ACL
// denies the topic), with the publishes written after the denied one
// unread: the reset that follows can take the PUBACKs of the copies before
// it along, which are then sent again, and the attempt fails. Once a topic
// has been refused so, its next copies go alone in flight, each after
// those before it have their PUBACKs: the broker refuses it and closes a
// connection with nothing unread, the copy is held and the output goes
// on, no attempt failing and no copy sent twice.
func TestMQTTSendsACopyToATopicTheBrokerDeniedAloneInFlight(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("topic read clean/#\ntopic write clean/ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Extra: []string{"acl_file " + acl}})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	out := mqttOutput(t, broker, 64)
	defer out.Close()

	entries := make([]engine.OutboxEntry, 60)
	for i := range entries {
		e := &entries[i]
		e.ID, e.Target, e.Route, e.Sequence = uint64(i+1)<<8, "clean/ok", "incidents", int64(i+1)
		e.Payload = fmt.Appendf(nil, `{"n":%d}`, i+1)
		e.Key[0] = byte(i + 1)
	}
	entries[0].Target = "clean/denied" // the broker's first answer for the topic
	for _, i := range []int{20, 40} {
		entries[i].Target = "clean/denied"
	}
	got, err := out.Deliver(t.Context(), entries[:1])
	var ref *forward.RefusedError
	if got != 0 || !errors.As(err, &ref) || !strings.Contains(ref.Reason, "0x87 (not authorized)") {
		t.Fatalf("Deliver of the first copy to the denied topic = %d, %v; want it refused", got, err)
	}
	held := 1
	for done := 1; done < len(entries); {
		n, err := out.Deliver(t.Context(), entries[done:])
		done += n
		switch {
		case err == nil:
		case errors.As(err, &ref):
			held++
			done++
		default:
			t.Fatalf("Deliver of entries %d on: %v; want no attempt to fail", done+1, err)
		}
	}
	if held != 3 {
		t.Fatalf("%d copies refused, want the 3 to clean/denied", held)
	}
	waitFor(t, "the last copy reaches the subscriber", func() bool {
		msgs := sub.Messages()
		return len(msgs) > 0 && msgs[len(msgs)-1].User[forward.HeaderSequence] == "60"
	})
	var seqs, want []string
	for _, m := range sub.Messages() {
		seqs = append(seqs, m.User[forward.HeaderSequence])
	}
	for i := 2; i <= 60; i++ {
		if i != 21 && i != 41 {
			want = append(want, fmt.Sprint(i))
		}
	}
	if strings.Join(seqs, ",") != strings.Join(want, ",") {
		t.Fatalf("the subscriber received sequences\n%s\nwant each once, in order:\n%s", strings.Join(seqs, ","), strings.Join(want, ","))
	}
}
