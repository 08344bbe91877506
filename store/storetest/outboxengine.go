package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// forwardRoutes forward applied messages: incidents three ways (the NATS
// subject names a field some messages lack, which skips that forward),
// meters once.
var forwardRoutes = []engine.Route{
	{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "unit"}, Sequence: "seq", Epoch: "boot",
		Effects: []engine.EffectSpec{
			{Entity: "incident/{incident}", Add: map[string]string{"casualties": "delta"}},
			{Forward: &engine.ForwardSpec{Topic: "clean/{topic}"}},
			{Forward: &engine.ForwardSpec{NATS: "cop.{agency}.{incident}"}},
			{Forward: &engine.ForwardSpec{Webhook: "https://cop.example/hooks/incidents"}},
		}},
	{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/meters/{topic[1]}"}}}},
}

// forwarded is what the engine should have written for one decision.
type forwarded struct {
	dec     engine.Decision
	topic   string
	payload []byte
	targets map[int]string // forward index → target; absent: skipped
}

func (f forwarded) entries(now time.Time) []engine.OutboxEntry {
	var out []engine.OutboxEntry
	for i := range 3 {
		target, ok := f.targets[i]
		if !ok {
			continue
		}
		output := []string{engine.OutputMQTT, engine.OutputNATS, engine.OutputWebhook}[i]
		if f.dec.Route == "meters" {
			output = engine.OutputMQTT
		}
		out = append(out, normalizeOutbox(engine.OutboxEntry{ID: engine.OutboxID(f.dec.Position, i), Output: output, Target: target,
			Route: f.dec.Route, Topic: f.topic, Source: f.dec.Source, Key: f.dec.Key, Epoch: f.dec.Epoch,
			Sequence: f.dec.Sequence, Time: now.UTC(), Payload: f.payload}))
	}
	return out
}

func incidentMsg(seq int, incident string, extra string) engine.Message {
	inc := ""
	if incident != "" {
		inc = fmt.Sprintf(`,"incident":%q`, incident)
	}
	return engine.Message{Topic: "incidents/fd/e1", Payload: fmt.Appendf(nil, `{"agency":"fd","unit":"e1","boot":1,"seq":%d%s,"delta":1%s}`, seq, inc, extra)}
}

func testOutboxEngine(t *testing.T, h *outboxHarness) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	e, err := engine.New(t.Context(), h.s.Store, engine.Options{Routes: forwardRoutes, SequenceSpan: 64, TTL: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("engine with forward routes: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	msgs := []engine.Message{
		incidentMsg(100, "7", ""),                                 // applied
		incidentMsg(100, "7", ""),                                 // duplicate
		incidentMsg(100, "7", " "),                                // the same content re-serialised: duplicate
		incidentMsg(100, "8", ""),                                 // same key, other content: conflict
		incidentMsg(103, "", ""),                                  // applied, no incident: the NATS forward is skipped
		incidentMsg(101, "7", ""),                                 // applied_late
		incidentMsg(10, "7", ""),                                  // below the window: quarantined
		{Topic: "incidents/fd/e1", Payload: []byte(`{"agency":`)}, // malformed
		{Topic: "plant/m-3/energy", Payload: []byte("{\"msgId\":\"r-1\",\"kwh\":0.25,\"note\":\"\\u00e9\\u0000\"}")},
		{Topic: "plant/m-3/energy", Payload: []byte(`{"msgId":"r-1", "kwh":0.25,"note":"é\u0000"}`)}, // duplicate
	}
	ds, err := e.Process(t.Context(), msgs)
	if err != nil {
		t.Fatalf("Process: %v", err)
	}
	wantOutcomes := []engine.Outcome{engine.Applied, engine.Duplicate, engine.Duplicate, engine.Conflict, engine.Applied,
		engine.AppliedLate, engine.Quarantined, engine.Malformed, engine.Applied, engine.Duplicate}
	var want []engine.OutboxEntry
	for i, d := range ds {
		if d.Outcome != wantOutcomes[i] {
			t.Fatalf("message %d decided %v (%s), want %v", i, d.Outcome, d.Reason, wantOutcomes[i])
		}
		if !d.Outcome.Effective() {
			continue
		}
		f := forwarded{dec: d, topic: msgs[i].Topic, payload: msgs[i].Payload}
		if d.Route == "meters" {
			f.targets = map[int]string{0: "clean/meters/m-3"}
		} else {
			f.targets = map[int]string{0: "clean/incidents/fd/e1", 2: "https://cop.example/hooks/incidents"}
			if i != 4 {
				f.targets[1] = "cop.fd.7"
			}
		}
		want = append(want, f.entries(now)...)
	}
	o := h.ob(t)
	equalEntries(t, "the engine's entries", pending(t, o, h.member), want)

	// A released message that applies forwards too, under its release's position.
	qid := ds[6].Position
	qid += h.s.qbase
	rel, err := e.Release(t.Context(), qid, "duty officer")
	if err != nil || !rel.Outcome.Effective() {
		t.Fatalf("Release = %v (%s), %v", rel.Outcome, rel.Reason, err)
	}
	rf := forwarded{dec: rel, topic: msgs[6].Topic, payload: msgs[6].Payload,
		targets: map[int]string{0: "clean/incidents/fd/e1", 1: "cop.fd.7", 2: "https://cop.example/hooks/incidents"}}
	want = append(want, rf.entries(now)...)
	equalEntries(t, "entries after a release", pending(t, o, h.member), want)

	// A downstream that refuses an entry for good: it is held, audited.
	refused := want[1]
	if err := e.HoldForward(t.Context(), h.member, refused, "422 Unprocessable Entity"); err != nil {
		t.Fatalf("HoldForward: %v", err)
	}
	hs := held(t, o)
	if len(hs) != 1 || hs[0].ID != refused.ID || hs[0].Member != h.member || !strings.Contains(hs[0].Reason, "422") {
		t.Fatalf("held after HoldForward: %+v", hs)
	}
	equalEntries(t, "the held entry", []engine.OutboxEntry{hs[0].OutboxEntry}, []engine.OutboxEntry{refused})
	want = append(want[:1:1], want[2:]...)
	equalEntries(t, "pending after HoldForward", pending(t, o, h.member), want)
	last := lastRecord(t, h)
	if last.Outcome != engine.OutcomeForwardHeld || last.Ref != refused.ID || last.Key != refused.Key {
		t.Fatalf("the hold's audit record: %+v", last)
	}
}

// lastRecord is the last audit record of the harness's member.
func lastRecord(t *testing.T, h *outboxHarness) engine.AuditRecord {
	t.Helper()
	var last engine.AuditRecord
	err := h.s.ScanAudit(t.Context(), 0, func(r engine.AuditRecord) error {
		last = r
		return nil
	})
	if err != nil {
		t.Fatalf("ScanAudit: %v", err)
	}
	return last
}
