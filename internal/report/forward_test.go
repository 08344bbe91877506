package report_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// An outbox entry's records refer to the entry, not to a quarantine
// entry: they are counted as forwards and resolve nothing.
func TestForwardRecordsAreCountedApartFromTheQuarantine(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	clean := engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Webhook: "http://127.0.0.1:1/readings"}}}}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{clean}, Now: func() time.Time { return start }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var msgs []engine.Message
	for i := range 3 {
		msgs = append(msgs, engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":1}`, i)})
	}
	msgs = append(msgs, engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"kwh":1}`)}) // held: no msgId
	if _, err := e.Process(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	pending, err := st.Outbox(ctx, "", 0, 10)
	if err != nil || len(pending) != 3 {
		t.Fatalf("outbox %d entries, %v", len(pending), err)
	}
	for _, en := range pending {
		if err := e.HoldForward(ctx, "", en, "422 Unprocessable Entity"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.RetryForward(ctx, "", pending[0].ID, "", "j.doe"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DropForward(ctx, "", pending[1].ID, "the meter was decommissioned", "j.doe"); err != nil {
		t.Fatal(err)
	}
	snap, _ := st.Load(ctx)
	rep, err := report.Build(report.Records(ctx, st, nil), report.Options{Heads: map[string]engine.AuditHead{"": snap.AuditHead},
		Now: func() time.Time { return start.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Totals.Forwards, (report.Forwards{Held: 3, Retried: 1, Dropped: 1}); got != want {
		t.Fatalf("forwards %+v, want %+v", got, want)
	}
	if rep.Totals.Released != 0 || rep.Totals.Discarded != 0 || len(rep.Quarantine) != 1 || rep.Quarantine[0].Status != "open" {
		t.Fatalf("released %d, discarded %d, quarantine %+v: a forward record resolves no quarantine entry",
			rep.Totals.Released, rep.Totals.Discarded, rep.Quarantine)
	}
	if !rep.Verification.Intact {
		t.Fatalf("verification %+v", rep.Verification)
	}
}
