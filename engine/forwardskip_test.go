package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAForwardSkippedForAnAbsentFieldIsLoggedOnce: a forward whose
// template names a field the messages lack (a misspelt path) is skipped
// for each of them, as an entity effect is, and says so once in the log,
// naming the route, the template and the field, rather than forwarding
// nothing without a word.
func TestAForwardSkippedForAnAbsentFieldIsLoggedOnce(t *testing.T) {
	ctx := context.Background()
	r := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"source_id"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{NATS: "cop.{agncy}.{source_id}"}}}}
	var logs bytes.Buffer
	st := memory.New()
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{r}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(id, extra string) engine.Message {
		return engine.Message{Topic: "incidents/x", Payload: []byte(`{"msgId":"` + id + `","source_id":"s1"` + extra + `}`)}
	}
	if _, err := e.Process(ctx, []engine.Message{msg("m1", ""), msg("m2", ""), msg("m3", `,"agncy":"fd"`), msg("m4", "")}); err != nil {
		t.Fatal(err)
	}
	entries, err := st.Outbox(ctx, "", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Target != "cop.fd.s1" {
		t.Fatalf("outbox: %+v, want the one entry of m3", entries)
	}
	if n := strings.Count(logs.String(), "forward skipped"); n != 1 {
		t.Fatalf("%d lines say the forward was skipped, want 1:\n%s", n, logs.String())
	}
	for _, want := range []string{"route=incidents", "template=cop.{agncy}.{source_id}", "field=agncy"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log line lacks %s:\n%s", want, logs.String())
		}
	}
}
