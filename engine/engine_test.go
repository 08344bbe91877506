package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

var incidentRoute = engine.Route{
	Name: "incidents", Topic: "incidents/#",
	Source: []string{"agency", "source_id"}, Sequence: "sequence", Epoch: "boot_id",
	Effects: []engine.EffectSpec{
		{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}},
		{Entity: "unit/{unit_id}", Set: map[string]string{"status": "unit_status"}},
	},
}

var meterRoute = engine.Route{
	Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "{site}", Set: map[string]string{"kw": "kw"}}, {Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"},
		Max: map[string]string{"peak": "kw"}, Min: map[string]string{"low": "kw"}}},
}

type harness struct {
	t     *testing.T
	e     *engine.Engine
	store *memory.Store
	clock time.Time
}

func newHarness(t *testing.T, opts engine.Options) *harness {
	t.Helper()
	h := &harness{t: t, store: memory.New(), clock: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	if opts.Routes == nil {
		opts.Routes = []engine.Route{incidentRoute, meterRoute}
	}
	opts.Now = func() time.Time { return h.clock }
	e, err := engine.New(context.Background(), h.store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	h.e = e
	return h
}

// inc builds an incident update; extra is "k":v JSON members.
func inc(agency, src string, boot any, seq any, extra string) engine.Message {
	b, _ := json.Marshal(boot)
	s, _ := json.Marshal(seq)
	p := fmt.Sprintf(`{"agency":%q,"source_id":%q,"boot_id":%s,"sequence":%s`, agency, src, b, s)
	if extra != "" {
		p += "," + extra
	}
	return engine.Message{Topic: "incidents/" + agency, Payload: []byte(p + "}")}
}

func meter(site, id, kwh string) engine.Message {
	return engine.Message{Topic: "plant/" + site + "/energy", Payload: []byte(fmt.Sprintf(`{"msgId":%q,"kwh":%s}`, id, kwh))}
}

func (h *harness) feed(msgs ...engine.Message) []engine.Decision {
	h.t.Helper()
	ds, err := h.e.Process(context.Background(), msgs)
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

func (h *harness) outcomes(msgs ...engine.Message) string {
	h.t.Helper()
	var out []string
	for _, d := range h.feed(msgs...) {
		out = append(out, d.Outcome.String())
	}
	return strings.Join(out, " ")
}

func (h *harness) state() string {
	h.t.Helper()
	b, err := json.Marshal(engine.StateJSON(h.e.State()))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func TestDecisionRules(t *testing.T) {
	cases := []struct {
		name string
		opts engine.Options
		msgs []engine.Message
		want string
	}{
		{"a replay with the same content is a duplicate",
			engine.Options{}, []engine.Message{inc("fd", "e1", 1, 1, ""), inc("fd", "e1", 1, 1, "")},
			"applied duplicate"},
		{"a re-serialised payload with the same content is a duplicate",
			engine.Options{}, []engine.Message{
				{Topic: "incidents/fd", Payload: []byte(`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1,"casualty_delta":1.50}`)},
				{Topic: "incidents/fd", Payload: []byte(`{ "casualty_delta": 15e-1, "sequence": 1, "boot_id": 1, "source_id": "\u00651", "agency": "fd", "noise": [1] }`)}},
			"applied duplicate"},
		{"the same key with different content is a conflict",
			engine.Options{}, []engine.Message{inc("fd", "e1", 1, 1, `"casualty_delta":1`), inc("fd", "e1", 1, 1, `"casualty_delta":2`)},
			"applied conflict"},
		{"a message that fills a gap is applied late",
			engine.Options{}, []engine.Message{inc("fd", "e1", 1, 1, ""), inc("fd", "e1", 1, 3, ""), inc("fd", "e1", 1, 2, "")},
			"applied applied applied_late"},
		{"a seen sequence whose key left the window is still a duplicate",
			engine.Options{MaxEntries: 1}, []engine.Message{inc("fd", "e1", 1, 1, ""), inc("fd", "e1", 1, 2, ""), inc("fd", "e1", 1, 1, "")},
			"applied applied duplicate"},
		{"a sequence below the window is quarantined",
			engine.Options{SequenceSpan: 64, MaxEntries: 1}, []engine.Message{inc("fd", "e1", 1, 100, ""), inc("fd", "e1", 1, 36, "")},
			"applied quarantined"},
		{"a new epoch opens a fresh window and the old one still catches replays",
			engine.Options{MaxEntries: 1}, []engine.Message{inc("fd", "e1", 1, 5, ""), inc("fd", "e1", 2, 1, ""), inc("fd", "e1", 1, 5, ""), inc("fd", "e1", 1, 6, "")},
			"applied applied duplicate applied_late"},
		{"an epoch older than those kept is quarantined",
			engine.Options{KeepEpochs: 1}, []engine.Message{inc("fd", "e1", 1, 1, ""), inc("fd", "e1", 2, 1, ""), inc("fd", "e1", 3, 1, ""), inc("fd", "e1", 1, 2, "")},
			"applied applied applied quarantined"},
		{"string epochs are ordered by first appearance",
			engine.Options{KeepEpochs: 1, MaxEntries: 1}, []engine.Message{inc("fd", "e1", "boot-b", 1, ""), inc("fd", "e1", "boot-a", 1, ""), inc("fd", "e1", "boot-c", 1, ""), inc("fd", "e1", "boot-b", 2, "")},
			"applied applied applied quarantined"},
		{"a numeric and a string epoch of the same text are different epochs",
			engine.Options{}, []engine.Message{inc("fd", "e1", 7, 1, ""), inc("fd", "e1", "7", 1, "")},
			"applied applied"},
		{"separator-joined sources do not collide",
			engine.Options{}, []engine.Message{inc("a|b", "c", 1, 1, ""), inc("a", "b|c", 1, 1, "")},
			"applied applied"},
		{"an id route suppresses a replayed id",
			engine.Options{}, []engine.Message{meter("m3", "meter-3-000042", "0.25"), meter("m3", "meter-3-000042", "0.25"), meter("m3", "meter-3-000042", "0.5")},
			"applied duplicate conflict"},
		{"the same id on two meters is two messages",
			engine.Options{}, []engine.Message{meter("m3", "x-1", "1"), meter("m4", "x-1", "1")},
			"applied applied"},
		{"the largest sequence, then a new epoch, retires the window without overflowing",
			engine.Options{}, []engine.Message{inc("fd", "e1", 1, int64(math.MaxInt64), ""), inc("fd", "e1", 2, 1, ""), inc("fd", "e1", 1, int64(math.MaxInt64), "")},
			"applied applied duplicate"},
		{"a replay within one batch is a duplicate",
			engine.Options{}, []engine.Message{inc("fd", "e1", 1, 9, ""), inc("fd", "e1", 1, 9, "")},
			"applied duplicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.opts)
			var got []string
			for _, m := range c.msgs {
				got = append(got, h.outcomes(m))
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("got %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
}

// TestSourceFieldsAreBoundedTogether: each source part may be 1 kB, and
// all of them 2 kB: a longer source could not be a PostgreSQL index entry,
// and would fail every batch it is in there.
func TestSourceFieldsAreBoundedTogether(t *testing.T) {
	route := engine.Route{Name: "units", Topic: "units/#", Source: []string{"agency", "unit", "crew"},
		Sequence: "sequence", Effects: []engine.EffectSpec{{Entity: "unit/{sequence}", Set: map[string]string{"crew": "crew"}}}}
	h := newHarness(t, engine.Options{Routes: []engine.Route{route}})
	msg := func(crew string) engine.Message {
		return engine.Message{Topic: "units/x", Payload: []byte(fmt.Sprintf(`{"agency":%q,"unit":%q,"crew":%q,"sequence":1}`,
			strings.Repeat("a", 1024), strings.Repeat("u", 1023), crew))}
	}
	if d := h.feed(msg("c"))[0]; d.Outcome != engine.Applied {
		t.Fatalf("a source of 2048 bytes in three parts: %s %q, want applied", d.Outcome, d.Reason)
	}
	over := msg("cc")
	d := h.feed(over)[0]
	if want := "the source fields are 2049 bytes together, over 2048"; d.Outcome != engine.Malformed || !strings.Contains(d.Reason, want) {
		t.Fatalf("a source of 2049 bytes in three parts: %s %q, want malformed %q", d.Outcome, d.Reason, want)
	}
	assertHeld(t, h, d.Position, string(over.Payload))
	route.Name = strings.Repeat("r", 65) // a route's name is part of each of its sources'
	_, err := engine.New(t.Context(), memory.New(), engine.Options{Routes: []engine.Route{route}})
	if !errors.Is(err, engine.ErrConfig) || !strings.Contains(err.Error(), "65 bytes, over 64") {
		t.Fatalf("a route named with 65 bytes = %v, want ErrConfig", err)
	}
}

func TestMalformedReasonsNameTheField(t *testing.T) {
	cases := []struct {
		name, topic, payload, reason string
	}{
		{"a string sequence is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":"12"}`, "sequence field sequence: want a JSON integer, got string"},
		{"a fractional sequence is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":12.5}`, "sequence field sequence is written with a fraction or an exponent (12.5): want a JSON integer"},
		{"a sequence in exponent form is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1e5}`, "sequence field sequence is written with a fraction or an exponent (100000): want a JSON integer"},
		{"a sequence written with a fraction is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":7.0}`, "sequence field sequence is written with a fraction or an exponent (7): want a JSON integer"},
		{"an epoch in exponent form is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":2e0,"sequence":1}`, "epoch field boot_id is written with a fraction or an exponent (2): want a JSON integer"},
		{"a 40 kB source part is refused", "incidents/fd", `{"agency":"` + strings.Repeat("a", 40000) + `","source_id":"e1","boot_id":1,"sequence":1}`, "source field agency is 40000 bytes, over 1024"},
		{"a 2 kB entity name is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1,"incident_id":"` + strings.Repeat("i", 2000) + `"}`, "effects[0]: the entity name is 2009 bytes, over 1024"},
		{"an empty entity name is refused", "plant/m1/energy", `{"msgId":"a","kwh":1,"site":""}`, "the entity name is empty"},
		{"a number with a huge exponent is refused", "plant/m1/energy", `{"msgId":"a","kwh":1e99999}`, "kwh: 1e99999 is out of range"},
		{"a number with too many digits is refused", "plant/m1/energy", `{"msgId":"a","kwh":` + strings.Repeat("9", 120) + `}`, "has more than 100 digits"},
		{"a negative sequence is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":-4}`, "sequence field sequence: -4 is negative"},
		{"a sequence of 2^63 is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":9223372036854775808}`, "out of range"},
		{"a missing source field is refused", "incidents/fd", `{"agency":"fd","boot_id":1,"sequence":1}`, "source field source_id is missing"},
		{"an object source field is refused", "incidents/fd", `{"agency":{"x":1},"source_id":"e1","boot_id":1,"sequence":1}`, "source field agency: want a string or number, got object or array"},
		{"a boolean epoch is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":true,"sequence":1}`, "epoch field boot_id: want an integer or a string, got boolean"},
		{"a fractional epoch is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1.5,"sequence":1}`, "epoch field boot_id is written with a fraction or an exponent (1.5): want a JSON integer"},
		{"an epoch past int64 is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":9223372036854775808,"sequence":1}`, "epoch field boot_id: 9223372036854775808 is not in int64 range"},
		{"a string where an add reads a number is refused", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1,"casualty_delta":"3"}`, "effect field casualty_delta: want a JSON number, got string"},
		{"text that is not JSON is refused", "incidents/fd", `{"agency":`, "payload is not valid JSON"},
		{"a payload nested 1001 levels deep is refused, saying so", "plant/m1/energy", `{"msgId":"a","kwh":1,"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
			"payload nests arrays and objects more than 1000 levels deep"},
		{"an array payload is refused as not an object", "incidents/fd", `[{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1}]`, "payload is a JSON array, not an object"},
		{"a null payload is refused as not an object", "incidents/fd", `null`, "payload is a JSON null, not an object"},
		{"a number payload is refused as not an object", "plant/m1/energy", ` 42`, "payload is a JSON number, not an object"},
		{"an unrouted topic is refused", "weather/x", `{}`, `no route matches topic "weather/x"`},
		{"a topic that is not UTF-8 is refused", "incidents/\xff", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1}`, `topic "incidents/\xff" is not valid UTF-8, which no MQTT topic name may`},
		{"a topic with a wildcard is refused", "incidents/+", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1}`, `topic "incidents/+" holds a wildcard ('+' or '#')`},
		{"a topic with NUL is refused", "incidents/\x00", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1}`, `topic "incidents/\x00" holds NUL`},
		{"a missing id is refused", "plant/m1/energy", `{"kwh":1}`, "id field msgId is missing"},
		{"an empty id is refused", "plant/m1/energy", `{"msgId":"","kwh":1}`, "id field msgId is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, engine.Options{})
			d := h.feed(engine.Message{Topic: c.topic, Payload: []byte(c.payload)})[0]
			if d.Outcome != engine.Malformed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %s %q, want malformed %q", d.Outcome, d.Reason, c.reason)
			}
			assertHeld(t, h, d.Position, c.payload)
		})
	}
	t.Run("a payload over max_payload is refused", func(t *testing.T) {
		h := newHarness(t, engine.Options{MaxPayload: 64})
		big := `{"msgId":"a","pad":"` + strings.Repeat("x", 100) + `"}`
		d := h.feed(engine.Message{Topic: "plant/m1/energy", Payload: []byte(big)})[0]
		if d.Outcome != engine.Malformed || d.Reason != "payload is 122 bytes, over max_payload 64" || d.Route != "meters" {
			t.Fatalf("got %s %q on route %q, want malformed for its size on route meters", d.Outcome, d.Reason, d.Route)
		}
		assertHeld(t, h, d.Position, big)
	})
}

func assertHeld(t *testing.T, h *harness, id uint64, payload string) {
	t.Helper()
	q, err := h.store.Quarantined(context.Background(), id)
	if err != nil {
		t.Fatalf("quarantine #%d: %v", id, err)
	}
	if string(q.Payload) != payload {
		t.Fatalf("quarantined payload %q, want %q", q.Payload, payload)
	}
}
