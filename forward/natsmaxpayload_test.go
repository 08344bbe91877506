package forward_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// natsWireSize is the size of a NATS message as the server holds it to its
// max_payload: the payload and the header block, "NATS/1.0\r\n", a
// "Name: value\r\n" line per header, "\r\n".
func natsWireSize(e engine.OutboxEntry, msgID string) int {
	size := len("NATS/1.0\r\n\r\n") + len(e.Payload)
	for _, p := range forward.Properties(e) {
		size += len(p.Name) + len(": \r\n") + len(p.Value)
	}
	return size + len("Nats-Msg-Id: \r\n") + len(msgID)
}

// A copy whose payload is under the server's max_payload, which its
// replayguard-* headers and Nats-Msg-Id take over it, is refused for good,
// and the reason gives what the server compares, the copy's size with its
// headers, and the limit: a payload smaller than the limit it is said to
// exceed leaves an operator nothing to act on. A copy of exactly the limit
// is delivered, so the size said is the server's.
func TestNATSRefusesACopyOverTheServersMaxPayloadNamingItsSizeAndTheLimit(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("max_payload: 1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{Extra: []string{"-c", conf}})
	srv.CreateStream("CLEAN", "clean.>")
	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx := context.Background()

	entries := make([]engine.OutboxEntry, 3)
	for i := range entries {
		e := &entries[i]
		e.Target, e.Route, e.Source, e.Sequence = "clean.s", "incidents", []string{"fd", "e7"}, int64(i+1)
		e.Key[0] = byte(i + 1)
		e.Payload = []byte(`{"n":1}`)
	}
	// entries[0] exactly at the limit, entries[1] one byte over it, both
	// with payloads well under it.
	for i, size := range []int{1024, 1025} {
		e := &entries[i]
		e.Payload = []byte(`""`)
		pad := size - natsWireSize(*e, e.Key.String())
		e.Payload = []byte(`"` + strings.Repeat("x", pad) + `"`)
		if got := natsWireSize(*e, e.Key.String()); got != size || len(e.Payload) >= 1000 {
			t.Fatalf("entry %d: %d bytes on the wire with a payload of %d", i, got, len(e.Payload))
		}
	}

	n, err := out.Deliver(ctx, entries)
	var ref *forward.RefusedError
	if n != 1 || !errors.As(err, &ref) || ref.Index != 1 {
		t.Fatalf("Deliver: %d, %v; want entry 0 delivered and entry 1 refused for good", n, err)
	}
	want := fmt.Sprintf(`nats: the copy to "clean.s" is 1025 bytes with its headers (a payload of %d), over the server's max_payload of 1024 bytes`,
		len(entries[1].Payload))
	if ref.Reason != want {
		t.Fatalf("reason:\n%s\nwant\n%s", ref.Reason, want)
	}
	if n, err := out.Deliver(ctx, entries[2:]); n != 1 || err != nil {
		t.Fatalf("Deliver of the rest: %d, %v", n, err)
	}
	if got := srv.StreamMessages("CLEAN"); got != 2 {
		t.Fatalf("the stream holds %d messages, want 2", got)
	}
}
