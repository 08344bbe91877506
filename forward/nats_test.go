package forward_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestNATSWaitsForItsStreamThenDeliversOnceUnderJetStreamDedup(t *testing.T) {
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{NATS: "dispatch.{agency}.{source_id}"}, map[string]forward.Output{engine.OutputNATS: out},
		forward.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	r.run()
	ctx := context.Background()
	var keys []string
	for seq := 1; seq <= 30; seq += 10 {
		var batch []engine.Message
		for s := seq; s < seq+10; s++ {
			batch = append(batch, incident(fmt.Sprintf("e%d", s%3), s))
		}
		keys = append(keys, r.keys(ctx, batch...)...)
	}

	// No stream takes the subjects yet: the entries wait, and readiness says why.
	waitFor(t, "the output reports the missing stream", func() bool {
		w := r.d.Status().Warning()
		return strings.Contains(w, "nats output failing") && strings.Contains(w, "no JetStream stream takes the subject")
	})
	if n, _ := r.store.OutboxDepth(ctx, ""); n != 30 {
		t.Fatalf("%d entries pending without a stream, want 30", n)
	}

	stream, err := jetStreamOf(t, srv).CreateStream(ctx, jetstream.StreamConfig{Name: "DISPATCH", Subjects: []string{"dispatch.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	if w := r.d.Status().Warning(); w != "" {
		t.Fatalf("warning after delivery: %s", w)
	}

	msgs := streamMessages(t, ctx, stream, 30)
	for i, m := range msgs {
		if m.Header.Get("Nats-Msg-Id") != keys[i] || m.Header.Get(forward.HeaderKey) != keys[i] {
			t.Fatalf("message %d carries id %q, key %q; want %s", i, m.Header.Get("Nats-Msg-Id"), m.Header.Get(forward.HeaderKey), keys[i])
		}
		want := incident(fmt.Sprintf("e%d", (i+1)%3), i+1)
		if string(m.Data) != string(want.Payload) || m.Subject != fmt.Sprintf("dispatch.fd.e%d", (i+1)%3) ||
			m.Header.Get(forward.HeaderSequence) != fmt.Sprint(i+1) || m.Header.Get(forward.HeaderSource) != fmt.Sprintf(`["fd","e%d"]`, (i+1)%3) {
			t.Fatalf("message %d: subject %s, headers %v, data %s", i, m.Subject, m.Header, m.Data)
		}
	}

	// A redelivery, as after a crash between the PubAck and OutboxDone:
	// JetStream drops it by its Nats-Msg-Id and acknowledges it.
	again := make([]engine.OutboxEntry, 0, 30)
	for i, m := range msgs[:5] {
		var e engine.OutboxEntry
		e.Target, e.Payload, e.Route, e.Sequence = m.Subject, m.Data, "incidents", int64(i+1)
		e.Key, _ = engine.ParseHash(keys[i])
		again = append(again, e)
	}
	if n, err := out.Deliver(ctx, again); n != 5 || err != nil {
		t.Fatalf("redelivery: %d, %v", n, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 30 {
		t.Fatalf("the stream holds %d messages after the redelivery, want 30", info.State.Msgs)
	}
}

// jetStreamOf connects to srv for the rest of the test.
func jetStreamOf(t *testing.T, srv *testbroker.NATS) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func streamMessages(t *testing.T, ctx context.Context, s jetstream.Stream, n int) []*jetstream.RawStreamMsg {
	t.Helper()
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); seq <= uint64(n); seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// More entries than the output has awaiting PubAcks at once, one of them
// too large for the server: those before it are stored in order, it is
// refused by its index, none after it is stored by that call, and the
// next call delivers the rest behind them.
func TestNATSWindowKeepsTheOrderAndStopsAtARefusedEntry(t *testing.T) {
	// past two windows of publishes, entry 600 over the server's 1 MiB max_payload
	deliverAroundARefusal(t, jetstream.StreamConfig{}, 700, 600, 2<<20, 7, "")
}

// deliverAroundARefusal has a NATS output deliver total entries on subjects
// subjects of one stream (cfg, named CLEAN on clean.>), entry large of
// size bytes, which the output must refuse (for a reason holding reason);
// then the entries after it: the stream must hold every other entry, in
// order.
func deliverAroundARefusal(t *testing.T, cfg jetstream.StreamConfig, total, large, size, subjects int, reason string) {
	t.Helper()
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
	ctx := context.Background()
	cfg.Name, cfg.Subjects, cfg.Duplicates = "CLEAN", []string{"clean.>"}, time.Minute
	stream, err := jetStreamOf(t, srv).CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	entries := make([]engine.OutboxEntry, total)
	for i := range entries {
		e := &entries[i]
		e.Target, e.Route, e.Sequence = fmt.Sprintf("clean.s%d", i%subjects), "incidents", int64(i)
		e.Payload = fmt.Appendf(nil, `{"n":%d}`, i)
		e.Key[0], e.Key[1] = byte(i>>8), byte(i)
	}
	entries[large].Payload = make([]byte, size)

	n, err := out.Deliver(ctx, entries)
	var ref *forward.RefusedError
	if n != large || !errors.As(err, &ref) || ref.Index != large || !strings.Contains(ref.Reason, reason) {
		t.Fatalf("Deliver: %d, %v; want %d and entry %d refused for good", n, err, large, large)
	}
	if n, err := out.Deliver(ctx, entries[large+1:]); n != total-large-1 || err != nil {
		t.Fatalf("Deliver of the rest: %d, %v", n, err)
	}
	msgs := streamMessages(t, ctx, stream, total-1)
	for i, m := range msgs {
		want := i
		if i >= large {
			want = i + 1
		}
		if m.Header.Get(forward.HeaderKey) != entries[want].Key.String() || string(m.Data) != string(entries[want].Payload) {
			t.Fatalf("stream message %d is %s (key %s), want entry %d", i+1, m.Data, m.Header.Get(forward.HeaderKey), want)
		}
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != uint64(total-1) {
		t.Fatalf("the stream holds %v messages (%v), want %d", info.State.Msgs, err, total-1)
	}
}

// A call while the server is down fails, as nothing waits in a reconnect
// buffer to be sent behind what was lost; once it is back, a later call
// delivers the rest behind the first call's entries.
func TestNATSDeliversAgainOnceTheServerIsBack(t *testing.T) {
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
	ctx := context.Background()
	srv.CreateStream("CLEAN", "clean.>")
	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	entries := make([]engine.OutboxEntry, 20)
	for i := range entries {
		e := &entries[i]
		e.Target, e.Route, e.Sequence, e.Payload = "clean.s", "incidents", int64(i), fmt.Appendf(nil, `{"n":%d}`, i)
		e.Key[0] = byte(i + 1)
	}
	if n, err := out.Deliver(ctx, entries[:10]); n != 10 || err != nil {
		t.Fatalf("Deliver: %d, %v", n, err)
	}
	srv.Stop()
	if n, err := out.Deliver(ctx, entries[10:]); n != 0 || err == nil {
		t.Fatalf("Deliver with the server down: %d, %v; want 0 and an error", n, err)
	}
	// Once the client knows, a publish fails at once, saying why.
	waitFor(t, "the client to see the connection down", func() bool {
		_, err := out.Deliver(ctx, entries[10:])
		return err != nil && strings.Contains(err.Error(), "the connection is down, reconnecting")
	})
	srv.Restart()
	done := 10
	waitFor(t, "the rest delivered", func() bool {
		n, _ := out.Deliver(ctx, entries[done:])
		done += n
		return done == len(entries)
	})
	if got := srv.StreamMessages("CLEAN"); got != 20 {
		t.Fatalf("the stream holds %d messages, want 20", got)
	}
	stream, err := jetStreamOf(t, srv).Stream(ctx, "CLEAN")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range streamMessages(t, ctx, stream, 20) {
		if string(m.Data) != string(entries[i].Payload) {
			t.Fatalf("stream message %d is %s, want %s", i+1, m.Data, entries[i].Payload)
		}
	}
}

// TestNATSHoldsAnEntryItsStreamRefusesForGood: an entry over the stream's
// max_msg_size (under the server's max_payload) is refused by its PubAck:
// it is held, not sent again forever with the lane waiting behind it, and
// the entries after it are delivered, in order.
func TestNATSHoldsAnEntryItsStreamRefusesForGood(t *testing.T) {
	deliverAroundARefusal(t, jetstream.StreamConfig{MaxMsgSize: 512}, 10, 5, 2048, 1, "message size exceeds maximum")
}

// TestTwoForwardsOfOneMessageIntoOneStreamAreBothStored: a route with two
// NATS forwards whose subjects one stream takes publishes two copies of
// each message with one key. JetStream's duplicate window must not take
// the second for the first: each forward's copy has an id of its own
// (retries of one copy keep theirs), or the second is acknowledged as a
// duplicate and never stored.
func TestTwoForwardsOfOneMessageIntoOneStreamAreBothStored(t *testing.T) {
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
	ctx := context.Background()
	stream, err := jetStreamOf(t, srv).CreateStream(ctx, jetstream.StreamConfig{Name: "CLEAN", Subjects: []string{"clean.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	key, _ := engine.ParseHash(strings.Repeat("ab", 32))
	entries := []engine.OutboxEntry{
		{ID: engine.OutboxID(7, 0), Output: engine.OutputNATS, Target: "clean.cop.e1", Key: key, Sequence: -1, Payload: []byte(`{"a":1}`)},
		{ID: engine.OutboxID(7, 1), Output: engine.OutputNATS, Target: "clean.archive.e1", Key: key, Sequence: -1, Payload: []byte(`{"a":1}`)},
	}
	if n, err := out.Deliver(ctx, entries); n != 2 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	if n, err := out.Deliver(ctx, entries[1:]); n != 1 || err != nil { // the second copy sent again, as after a crash
		t.Fatalf("Deliver again = %d, %v", n, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("the stream holds %d messages, want both forwards' copies once each", info.State.Msgs)
	}
}

// TestNATSNamesAnUnreachableServerWithoutItsCredentials: the error of a
// failed connect reaches the log and the forward status of the API, so the
// password or token of the server's URL is left out of it.
func TestNATSNamesAnUnreachableServerWithoutItsCredentials(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	for _, u := range []string{"nats://rg:s3cret@" + addr, "nats://s3cret@" + addr} {
		out, err := forward.NewNATS(forward.NATSOptions{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		_, err = out.Deliver(context.Background(), []engine.OutboxEntry{{Target: "clean.s", Payload: []byte(`{}`)}})
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "nats://xxxxx@"+addr) {
			t.Errorf("%s: Deliver: %v; want an error naming nats://xxxxx@%s", u, err, addr)
		}
		out.Close()
	}
}
