package forward_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAnEntryTheDownstreamRefusesAloneForNowIsNamedAndCanBeSetAside: a
// receiver answers 503 to one update for ever and takes the others. The
// lane waits at that entry, readiness names it (id, attempts, the remedy),
// and an operator's hold of the pending entry lets the entries behind it
// go, leaving it held with an audit record naming the operator.
func TestAnEntryTheDownstreamRefusesAloneForNowIsNamedAndCanBeSetAside(t *testing.T) {
	srv, delivered := refusingReceiver(t, "2")
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 50 * time.Millisecond})
	r.run()
	ctx := context.Background()
	decs, err := r.eng.Process(ctx, []engine.Message{incident("e7", 1), incident("e7", 2), incident("e7", 3), incident("e7", 4)})
	if err != nil {
		t.Fatal(err)
	}
	stuck := engine.OutboxID(decs[1].Position, 0)
	named := fmt.Sprintf("at entry %d,", stuck)
	waitFor(t, "readiness names the entry the webhook output is stuck at", func() bool {
		st := r.d.Status()
		return len(st.Outputs) == 1 && st.Outputs[0].Stuck.ID == stuck && st.Outputs[0].Stuck.Attempts >= 3 &&
			strings.Contains(st.Warning(), named)
	})
	warn := r.d.Status().Warning()
	if !strings.Contains(warn, "503 Service Unavailable") || !strings.Contains(warn, fmt.Sprintf("outbox hold %d", stuck)) {
		t.Fatalf("warning %q: want the downstream's answer and the remedy", warn)
	}
	t.Logf("readiness: %s", warn)
	if d := delivered(); d != "1" {
		t.Fatalf("delivered %q before the hold, want 1 (the entries behind the refused one wait)", d)
	}

	if _, err := r.eng.HoldPending(ctx, "", stuck, " ", "duty officer"); err == nil {
		t.Fatal("a hold without a reason was taken")
	}
	res, err := r.eng.HoldPending(ctx, "", stuck, "dispatch answers 503 to this update alone", "duty officer")
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.Outcome != engine.OutcomeForwardHeld || res.Record.Operator != "duty officer" || res.Record.Ref != stuck {
		t.Fatalf("audit record %+v", res.Record)
	}
	waitFor(t, "the entries behind the held one are delivered", func() bool { return delivered() == "1,3,4" })
	waitFor(t, "the lane is no longer failing", func() bool { return r.d.Status().Warning() == "" })
	held, err := r.store.OutboxHeld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].ID != stuck || !strings.Contains(held[0].Reason, "held by an operator while pending: dispatch answers 503") {
		t.Fatalf("held %+v", held)
	}
	if _, err := r.eng.HoldPending(ctx, "", stuck, "again", "duty officer"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a second hold of the entry = %v, want ErrNotFound", err)
	}
}

// TestANATSEntryAStreamRefusesAloneForNowIsNamedAndCanBeSetAside: a
// stream that keeps one message a subject and discards new ones answers a
// second copy to one subject with a PubAck error for ever, while it takes
// other subjects. The lane waits at it, readiness names it, and an
// operator's hold lets the entries behind it go.
func TestANATSEntryAStreamRefusesAloneForNowIsNamedAndCanBeSetAside(t *testing.T) {
	srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
	ctx := context.Background()
	stream, err := jetStreamOf(t, srv).CreateStream(ctx, jetstream.StreamConfig{Name: "DISPATCH", Subjects: []string{"dispatch.>"},
		Discard: jetstream.DiscardNew, DiscardNewPerSubject: true, MaxMsgsPerSubject: 1, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out, err := forward.NewNATS(forward.NATSOptions{URL: srv.URL(), AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{NATS: "dispatch.{agency}.{source_id}"}, map[string]forward.Output{engine.OutputNATS: out},
		forward.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 50 * time.Millisecond})
	r.run()
	decs, err := r.eng.Process(ctx, []engine.Message{incident("e3", 1), incident("e3", 2), incident("e1", 1)})
	if err != nil {
		t.Fatal(err)
	}
	stuck := engine.OutboxID(decs[1].Position, 0)
	waitFor(t, "readiness names the entry the nats output is stuck at", func() bool {
		st := r.d.Status()
		return len(st.Outputs) == 1 && st.Outputs[0].Stuck.ID == stuck && st.Outputs[0].Stuck.Attempts >= 3 &&
			strings.Contains(st.Warning(), fmt.Sprintf("at entry %d,", stuck))
	})
	t.Logf("readiness: %s", r.d.Status().Warning())
	if _, err := r.eng.HoldPending(ctx, "", stuck, "dispatch keeps one update a unit", "duty officer"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the entry behind the held one is delivered", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	msgs := streamMessages(t, ctx, stream, 2)
	if msgs[0].Subject != "dispatch.fd.e3" || msgs[1].Subject != "dispatch.fd.e1" {
		t.Fatalf("stream holds %s, %s", msgs[0].Subject, msgs[1].Subject)
	}
	if held, err := r.store.OutboxHeld(ctx); err != nil || len(held) != 1 || held[0].ID != stuck {
		t.Fatalf("held %+v, %v", held, err)
	}
}
