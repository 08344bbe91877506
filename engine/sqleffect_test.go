package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// refusing is a shared store that runs sql effects the way a database
// refuses one: a statement whose note argument is "violates" fails
// because of its message, and Update decides again with that key refused.
type refusing struct {
	sharedBackend
	ran     []engine.SQLStatement // the statements of every written batch
	decides int
}

// Capabilities declares the wrapper in the store's place, running sql.
func (s *refusing) Capabilities() engine.Capabilities {
	c := s.sharedBackend.Capabilities()
	c.Shared, c.SQL = s, true
	return c
}

const refusal = "sql effects[1]: SQLSTATE 23505: duplicate key value violates unique constraint"

func (s *refusing) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	return s.sharedBackend.Update(ctx, r, func(rows *engine.Rows) (*engine.Batch, error) {
		refused := engine.SQLRefusals{}
		for {
			rows.Refused = refused
			s.decides++
			b, err := decide(rows)
			if err != nil {
				return nil, err
			}
			i := slices.IndexFunc(b.SQL, func(st engine.SQLStatement) bool { return st.Args[3].Text == "violates" })
			if i < 0 {
				s.ran = append(s.ran, b.SQL...)
				return b, nil
			}
			if _, again := refused[b.SQL[i].Key]; again {
				return nil, fmt.Errorf("key %s refused twice", b.SQL[i].Key)
			}
			refused[b.SQL[i].Key] = refusal
		}
	})
}

var sqlRoute = engine.Route{
	Name: "incidents", Topic: "incidents/#",
	Source: []string{"agency", "source_id"}, Sequence: "sequence", Epoch: "boot_id",
	Effects: []engine.EffectSpec{
		{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}},
		{SQL: "INSERT INTO casualties (incident, seq, key, note, delta, urgent) VALUES ($1, $2, $3, $4, $5, $6)",
			Args: []string{"incident_id", "@sequence", "@key", "note", "casualty_delta", "urgent"}},
	},
}

func incident(seq int, note, delta string) engine.Message {
	return engine.Message{Topic: "incidents/fire", Payload: fmt.Appendf(nil,
		`{"agency":"fd","source_id":"e7","boot_id":1,"sequence":%d,"incident_id":"7","note":%q,"casualty_delta":%s,"urgent":true}`, seq, note, delta)}
}

func TestAMessageWhoseStatementIsRefusedIsQuarantinedAndTheRestCommits(t *testing.T) {
	ctx := context.Background()
	m, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	st := &refusing{sharedBackend: m}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{sqlRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batch := []engine.Message{incident(1, "first", "2"), incident(2, "violates", "5"),
		incident(3, "third", "12345678901234567890.123456789"), incident(1, "first", "2")}
	ds, err := e.Process(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Outcome.String())
	}
	if want := []string{"applied", "quarantined", "applied", "duplicate"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if ds[1].Reason != refusal || st.decides != 2 {
		t.Fatalf("refused message: reason %q after %d decides", ds[1].Reason, st.decides)
	}
	if len(st.ran) != 2 {
		t.Fatalf("%d statements written, want the two applied messages'", len(st.ran))
	}
	a := st.ran[1].Args
	want := []engine.SQLArg{{Kind: engine.ArgString, Text: "7"}, {Kind: engine.ArgNumber, Text: "3"},
		{Kind: engine.ArgString, Text: ds[2].Key.String()}, {Kind: engine.ArgString, Text: "third"},
		{Kind: engine.ArgNumber, Text: "12345678901234567890.123456789"}, {Kind: engine.ArgBool, Text: "true"}}
	if !slices.Equal(a, want) {
		t.Fatalf("arguments %+v, want %+v", a, want)
	}
	state, _ := e.ReadState(ctx)
	if len(state) != 1 || state[0].Fields.Get("casualties").Num != "12345678901234567892.123456789" {
		t.Fatalf("state %+v: the refused message's effects must not apply", state)
	}
	srcs, _ := e.ReadSources(ctx)
	if len(srcs) != 1 || len(srcs[0].Gaps) != 1 || srcs[0].Gaps[0] != (engine.Range{From: 2, To: 2}) {
		t.Fatalf("sources %+v: the refused sequence stays unseen, a gap", srcs)
	}
	q, err := m.Quarantined(ctx, m.QuarantineBase()+ds[1].Position)
	if err != nil || string(q.Payload) != string(batch[1].Payload) || !strings.Contains(q.Reason, "23505") {
		t.Fatalf("held %+v, %v: want the raw bytes and the SQLSTATE", q, err)
	}

	// Released, it is refused again: held anew, never applied.
	d, err := e.Release(ctx, q.ID, "j.doe")
	if err != nil || d.Outcome != engine.Quarantined || !strings.HasSuffix(d.Reason, ": "+refusal) {
		t.Fatalf("release = %+v, %v", d, err)
	}
	if _, err := m.Quarantined(ctx, q.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the released entry is still open: %v", err)
	}
	// The decision names the entry that holds it now.
	if again, err := m.Quarantined(ctx, d.Held); d.Held != m.QuarantineBase()+d.Position || err != nil || string(again.Payload) != string(batch[1].Payload) {
		t.Fatalf("held again as #%d (%+v, %v), want the entry at the release's position %d", d.Held, again, err, d.Position)
	}
}

func TestASQLEffectNeedsAStoreThatRunsIt(t *testing.T) {
	_, err := engine.New(context.Background(), memory.New(), engine.Options{Routes: []engine.Route{sqlRoute}})
	if !errors.Is(err, engine.ErrConfig) || !strings.Contains(err.Error(), "postgres") {
		t.Fatalf("New = %v, want a config error naming the postgres store", err)
	}
}

func TestSQLAndForwardEffectsAreCheckedAtCompile(t *testing.T) {
	st := &refusing{}
	m, _ := memory.NewGroup(0, 0).Open("m1")
	st.sharedBackend = m
	for _, tc := range []struct {
		name string
		eff  engine.EffectSpec
		want string
	}{
		{"unknown meta", engine.EffectSpec{SQL: "SELECT $1", Args: []string{"@offset"}}, `"@offset" is none of`},
		{"epoch on a route without", engine.EffectSpec{SQL: "SELECT $1", Args: []string{"@epoch"}}, "@epoch on a route without epoch"},
		{"empty statement", engine.EffectSpec{SQL: " ", Args: []string{"msgId"}}, "empty statement"},
		{"a statement that ends the transaction", engine.EffectSpec{SQL: "/* done */ rollback"}, "begins with ROLLBACK, which controls the transaction"},
		{"two kinds", engine.EffectSpec{Entity: "m", Add: map[string]string{"kwh": "kwh"}, SQL: "SELECT 1"}, "one of"},
		{"two targets", engine.EffectSpec{Forward: &engine.ForwardSpec{Topic: "a", NATS: "b"}}, "exactly one of topic, webhook, nats"},
		{"open template", engine.EffectSpec{Forward: &engine.ForwardSpec{Topic: "clean/{topic"}}, "unbalanced"},
	} {
		r := engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId", Effects: []engine.EffectSpec{tc.eff}}
		_, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{r}})
		if !errors.Is(err, engine.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestAForwardTopicABrokerWouldRefuseIsQuarantined: a producer's field that
// renders an MQTT topic with a control character or a noncharacter (valid
// JSON, valid UTF-8) would have the broker close the output's connection
// at each attempt, and its lane would wait behind it for good; the message
// is quarantined at its decision instead, as malformed.
// TestAProducerCannotChooseABrokersDollarTopic: a template that begins
// with a field lets the message choose the topic's first level; one
// beginning with $ is the broker's ($CONTROL of Mosquitto's dynamic
// security takes commands there), and the message is held instead.
func TestAProducerCannotChooseABrokersDollarTopic(t *testing.T) {
	routes := []engine.Route{
		{Name: "mqtt", Topic: "plant/#", Source: []string{"site"}, ID: "msgId",
			Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "{site}/clean"}}}},
		{Name: "nats", Topic: "yard/#", Source: []string{"site"}, ID: "msgId",
			Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{NATS: "{site}.clean"}}}},
		{Name: "own", Topic: "sys/#", Source: []string{"site"}, ID: "msgId",
			Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "$share/{site}"}}}},
	}
	e, err := engine.New(context.Background(), memory.New(), engine.Options{Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i, tc := range []struct {
		topic, site string
		refused     bool
	}{
		{"plant/x", "$CONTROL/dynamic-security/v1", true},
		{"plant/x", "$SYS", true},
		{"plant/x", "site-$1", false},
		{"yard/x", "$JS.API.STREAM.DELETE", true},
		{"yard/x", "north", false},
		{"sys/x", "g", false}, // the template's own $
	} {
		msg := engine.Message{Topic: tc.topic, Payload: fmt.Appendf(nil, `{"msgId":"m%d","site":%q}`, i, tc.site)}
		d, err := e.Process(context.Background(), []engine.Message{msg})
		if err != nil {
			t.Fatal(err)
		}
		if refused := d[0].Outcome == engine.Malformed; refused != tc.refused || refused && !strings.Contains(d[0].Reason, "begins with $") {
			t.Errorf("%s site %q: %s %q", tc.topic, tc.site, d[0].Outcome, d[0].Reason)
		}
	}
}

// TestAForwardTopicOfMoreLevelsThanMosquittoTakesIsQuarantined: Mosquitto
// answers a PUBLISH whose topic holds more than 200 '/' by closing the
// connection (DISCONNECT 0x82), at every attempt, so the output's lane would
// wait behind the entry for good; a topic the message's field renders that
// deep, as "clean/{topic}" does of a 201-level input topic, which the input
// broker took, makes the message malformed instead.
func TestAForwardTopicOfMoreLevelsThanMosquittoTakesIsQuarantined(t *testing.T) {
	r := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"source_id"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{topic}"}}}}
	e, err := engine.New(context.Background(), memory.New(), engine.Options{Routes: []engine.Route{r}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i, tc := range []struct {
		levels  int // of the input topic; the copy's has one more
		refused bool
	}{
		{2, false}, {199, false}, {200, false}, {201, true}, {1000, true},
	} {
		topic := "incidents" + strings.Repeat("/x", tc.levels-1)
		msg := engine.Message{Topic: topic, Payload: fmt.Appendf(nil, `{"msgId":"m%d","source_id":"e1"}`, i)}
		d, err := e.Process(context.Background(), []engine.Message{msg})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("has %d levels, over the 201", tc.levels+1)
		if refused := d[0].Outcome == engine.Malformed; refused != tc.refused || refused && !strings.Contains(d[0].Reason, want) {
			t.Errorf("an input topic of %d levels: %s %q", tc.levels, d[0].Outcome, d[0].Reason)
		}
	}
}

func TestAForwardTopicABrokerWouldRefuseIsQuarantined(t *testing.T) {
	r := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"source_id"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{source_id}"}}}}
	e, err := engine.New(context.Background(), memory.New(), engine.Options{Routes: []engine.Route{r}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i, tc := range []struct {
		id      string // as JSON text
		refused bool
	}{
		{`a\u0001b`, true}, {`a\u001fb`, true}, {`a\u007fb`, true}, {`a\u0085b`, true}, {`a\u009fb`, true},
		{`a\ufdd0b`, true}, {`a\ufffeb`, true}, {`a\uffffb`, true}, {`a\ud83f\udffeb`, true},
		{`a\u00a0b`, false}, {`unit-é`, false}, {`a\ufffdb`, false}, {`a\ufdf0b`, false}, {`a\ud83d\ude92b`, false},
	} {
		msg := engine.Message{Topic: "incidents/x", Payload: fmt.Appendf(nil, `{"msgId":"m%d","source_id":"%s"}`, i, tc.id)}
		d, err := e.Process(context.Background(), []engine.Message{msg})
		if err != nil {
			t.Fatal(err)
		}
		if refused := d[0].Outcome == engine.Malformed; refused != tc.refused ||
			refused && !strings.Contains(d[0].Reason, "control character, a noncharacter") {
			t.Errorf("source_id %s: %s %q", tc.id, d[0].Outcome, d[0].Reason)
		}
	}
}
