package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

func TestHealthAndReadiness(t *testing.T) {
	f := newFixture(t, Config{})
	f.get("/healthz").want(t, http.StatusOK, nil)
	var ready map[string]bool
	f.get("/readyz").want(t, http.StatusOK, &ready)
	if !ready["ready"] {
		t.Fatalf("readyz body %v", ready)
	}
	f.ready.Store(false) // broker down or store not writable
	f.get("/readyz").want(t, http.StatusServiceUnavailable, nil)
	f.get("/healthz").want(t, http.StatusOK, nil)
}

func TestStateIsWhatStateJSONPrints(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(incident(1, "7", 2, "assigned"), incident(2, "7", 1, "available"), meter("meter-3-000001", "0.25"))
	f.process(incident(2, "7", 1, "available")) // a replay: no effect

	r := f.get("/api/v1/state")
	r.want(t, http.StatusOK, nil)
	// What `replayguard state --json` prints: an Encoder indenting by two.
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(engine.StateJSON(f.eng.State())); err != nil {
		t.Fatal(err)
	}
	if got := string(r.body); got != want.String() {
		t.Fatalf("state\n got %s\nwant %s", got, want.String())
	}
	const literal = `{"incident/7":{"casualties":3},"meter/meter-3":{"kwh":0.25},"unit/e7":{"status":"available"}}`
	if got := string(compactJSON(r.body)); got != literal {
		t.Fatalf("state %s, want %s", got, literal)
	}
}

// TestStateOfEntityPatternsIsWhatStateOfThemPrints: `state PATTERN`
// through a running process asks for entity=PATTERN, and gets only what
// matches; with limit, X-Total-Count counts the matches; a malformed
// pattern is a 400 naming it.
func TestStateOfEntityPatternsIsWhatStateOfThemPrints(t *testing.T) {
	f := newFixture(t, Config{})
	at := func(site string) engine.Message {
		return engine.Message{Topic: "plant/" + site + "/energy", Payload: []byte(`{"msgId":"a","kwh":1}`)}
	}
	f.process(incident(1, "7", 2, "assigned"), at("meter-3"), at("meter-4"), at("meter-40"))
	var got map[string]map[string]json.RawMessage
	f.get("/api/v1/state?entity=meter/meter-4*&entity=incident/7").want(t, http.StatusOK, &got)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"incident/7", "meter/meter-4", "meter/meter-40"}) {
		t.Fatalf("state of meter/meter-4* and incident/7: %v", names)
	}
	got = nil
	r := f.get("/api/v1/state?entity=meter/*&limit=2")
	r.want(t, http.StatusOK, &got)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"meter/meter-3", "meter/meter-4"}) || r.header.Get("X-Total-Count") != "3" {
		t.Fatalf("state of meter/* limit 2: %v, X-Total-Count %q; want the first 2 of 3", names, r.header.Get("X-Total-Count"))
	}
	r = f.get("/api/v1/state?entity=" + url.QueryEscape("meter/[x"))
	r.want(t, http.StatusBadRequest, nil)
	if !strings.Contains(string(r.body), `meter/[x`) {
		t.Fatalf("a malformed pattern: %s", r.body)
	}
}

func TestSourcesListSequenceHealth(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(incident(1, "7", 0, "a"), incident(5, "7", 0, "b")) // 2..4 missing
	var got []engine.SourceReport
	f.get("/api/v1/sources").want(t, http.StatusOK, &got)
	if !reflect.DeepEqual(got, f.eng.Sources()) {
		t.Fatalf("sources %+v, want %+v", got, f.eng.Sources())
	}
	if len(got) != 1 || len(got[0].Gaps) != 1 || got[0].Gaps[0] != (engine.Range{From: 2, To: 4}) {
		t.Fatalf("sources %+v: want one gap 2..4", got)
	}
}

func TestAuditFiltersAndPages(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(incident(1, "7", 1, "a"), incident(1, "7", 1, "a"), meter("m-1", "1"), meter("m-2", "2"))
	mid := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	f.process(meter("m-1", "1"), engine.Message{Topic: "nowhere", Payload: []byte("{}")})

	all := auditPage{}
	f.get("/api/v1/audit").want(t, http.StatusOK, &all)
	if len(all.Records) != 6 || all.Next != nil {
		t.Fatalf("all: %d records, next %v; want 6 and no next", len(all.Records), all.Next)
	}
	m2 := all.Records[3]
	tests := []struct {
		name  string
		query string
		want  []uint64 // positions
	}{
		{"outcome picks duplicates", "outcome=duplicate", []uint64{2, 5}},
		{"route picks a route", "route=meters", []uint64{3, 4, 5}},
		{"source matches one part", "source=e7", []uint64{1, 2}},
		{"source matches the joined parts", "source=fire/e7", []uint64{1, 2}},
		{"source matches a topic-level source", "source=meter-3", []uint64{3, 4, 5}},
		{"key picks one message", "key=" + strings.ToUpper(m2.Key.String()), []uint64{4}},
		{"since is inclusive of later records", "since=" + mid.Format(time.RFC3339Nano), []uint64{5, 6}},
		{"until excludes later records", "until=" + mid.Format(time.RFC3339Nano), []uint64{1, 2, 3, 4}},
		{"from starts at a position", "from=4", []uint64{4, 5, 6}},
		{"filters combine", "route=meters&outcome=applied", []uint64{3, 4}},
		{"an unrouted message is malformed with no route", "outcome=malformed", []uint64{6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var page auditPage
			f.get("/api/v1/audit?"+tt.query).want(t, http.StatusOK, &page)
			var got []uint64
			for _, r := range page.Records {
				got = append(got, r.Position)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("positions %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("pages cover the log once", func(t *testing.T) {
		var got []uint64
		from := uint64(0)
		for range 10 {
			var page auditPage
			f.get(fmt.Sprintf("/api/v1/audit?limit=4&from=%d", from)).want(t, http.StatusOK, &page)
			for _, r := range page.Records {
				got = append(got, r.Position)
			}
			if page.Next == nil {
				break
			}
			from = *page.Next
		}
		if !reflect.DeepEqual(got, []uint64{1, 2, 3, 4, 5, 6}) {
			t.Fatalf("paged positions %v", got)
		}
	})
}

func TestBadQueriesAreRefusedWith400(t *testing.T) {
	f := newFixture(t, Config{})
	for _, q := range []string{
		"/api/v1/audit?outcome=bogus",
		"/api/v1/audit?since=yesterday",
		"/api/v1/audit?until=" + url.QueryEscape("2024-13-01T00:00:00Z"),
		"/api/v1/audit?from=-1",
		"/api/v1/audit?limit=0",
		"/api/v1/audit?limit=ten",
		"/api/v1/quarantine?from=x",
		"/api/v1/quarantine/abc",
		"/api/v1/quarantine/0",
		"/api/v1/quarantine/99999999999999999999999",
	} {
		f.get(q).want(t, http.StatusBadRequest, nil)
	}
	var page auditPage
	f.get("/api/v1/audit?limit=100000").want(t, http.StatusOK, &page) // capped, not refused
}

// held returns one message per kind of hold: below the window, a conflict
// and a malformed one, after a run that opens the window.
func (f *fixture) hold() (below, conflict, malformed uint64) {
	f.t.Helper()
	f.process(incident(100, "9", 1, "a"))
	decs := f.process(
		incident(10, "9", 5, "a"),  // 100-64 > 10: below the window
		incident(100, "9", 7, "a"), // same key, other content
		engine.Message{Topic: "incidents/fire/e7", Payload: []byte("\x00not json")},
	)
	for i, want := range []engine.Outcome{engine.Quarantined, engine.Conflict, engine.Malformed} {
		if decs[i].Outcome != want {
			f.t.Fatalf("decision %d: %v (%s), want %v", i, decs[i].Outcome, decs[i].Reason, want)
		}
	}
	return decs[0].Position, decs[1].Position, decs[2].Position
}

func TestQuarantineListsPayloads(t *testing.T) {
	f := newFixture(t, Config{})
	below, conflict, malformed := f.hold()
	var page quarantinePage
	f.get("/api/v1/quarantine").want(t, http.StatusOK, &page)
	if page.Total != 3 || len(page.Entries) != 3 || page.Next != nil {
		t.Fatalf("page %+v", page)
	}
	byID := map[uint64]QuarantineItem{}
	for _, e := range page.Entries {
		byID[e.ID] = e
	}
	if e := byID[below]; e.Reason != "below_window" || e.Outcome != "quarantined" || string(e.Payload) == "null" ||
		e.PayloadB64 != base64.StdEncoding.EncodeToString(incident(10, "9", 5, "a").Payload) {
		t.Fatalf("below-window entry %+v", e)
	}
	if e := byID[conflict]; e.Outcome != "conflict" || !bytes.Contains(compactJSON(e.Payload), []byte(`"casualty_delta":7`)) {
		t.Fatalf("conflict entry %+v", e)
	}
	if e := byID[malformed]; string(e.Payload) != "null" || e.PayloadB64 != "AG5vdCBqc29u" {
		t.Fatalf("malformed entry %+v: want its bytes in base64 only", e)
	}

	// Every entry names its key, null for a message that has none, as a
	// reader taking the lines' fields by name expects of each line.
	var raw struct{ Entries []map[string]any }
	f.get("/api/v1/quarantine").want(t, http.StatusOK, &raw)
	for _, e := range raw.Entries {
		key, ok := e["key"]
		id := uint64(e["id"].(float64))
		switch k, _ := key.(string); {
		case !ok:
			t.Fatalf("entry %d has no key field: %v", id, e)
		case id == malformed && key != nil:
			t.Fatalf("malformed entry %d: key %v, want null", id, key)
		case id != malformed && len(k) != 64:
			t.Fatalf("entry %d: key %v, want 64 hex digits", id, key)
		}
	}

	var one QuarantineItem
	f.get(fmt.Sprintf("/api/v1/quarantine/%d", conflict)).want(t, http.StatusOK, &one)
	if one.ID != conflict {
		t.Fatalf("entry %+v", one)
	}
	f.get("/api/v1/quarantine/424242").want(t, http.StatusNotFound, nil)

	f.get("/api/v1/quarantine?limit=2").want(t, http.StatusOK, &page)
	if len(page.Entries) != 2 || page.Next == nil || *page.Next != malformed || page.Total != 3 {
		t.Fatalf("first page of 2: %+v", page)
	}
}

// TestQuarantineListsAPayloadNestedDeep: a payload nested as deep as JSON
// allows (encoding/json takes 10,000 levels) is held as malformed; its
// listing, a few levels deeper, must still encode, with the payload in
// base64 only, or no entry of its page could be listed.
func TestQuarantineListsAPayloadNestedDeep(t *testing.T) {
	f := newFixture(t, Config{})
	deep := []byte(`{"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`)
	d := f.process(engine.Message{Topic: "incidents/fire/e7", Payload: deep})[0]
	if d.Outcome != engine.Malformed {
		t.Fatalf("decision %v (%s), want malformed", d.Outcome, d.Reason)
	}
	var page quarantinePage
	f.get("/api/v1/quarantine").want(t, http.StatusOK, &page)
	if len(page.Entries) != 1 || string(page.Entries[0].Payload) != "null" || page.Entries[0].PayloadB64 != base64.StdEncoding.EncodeToString(deep) {
		t.Fatalf("page %+v", page)
	}
	var one QuarantineItem
	f.get(fmt.Sprintf("/api/v1/quarantine/%d", d.Position)).want(t, http.StatusOK, &one)
}

func TestReleaseAndDiscard(t *testing.T) {
	f := newFixture(t, Config{})
	below, conflict, malformed := f.hold()

	var res resolution
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "").want(t, http.StatusOK, &res)
	if res.Outcome != "applied" || res.ID != below {
		t.Fatalf("release: %+v", res)
	}
	if got := string(engine.StateJSON(f.eng.State())["incident/9"]["casualties"]); got != "6" {
		t.Fatalf("casualties after release = %s, want 6", got)
	}
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "{}").want(t, http.StatusNotFound, nil)
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", malformed), "").want(t, http.StatusConflict, nil)

	id := fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict)
	f.post(id, "").want(t, http.StatusBadRequest, nil)
	f.post(id, `{"reason": "  "}`).want(t, http.StatusBadRequest, nil)
	f.post(id, `{"reason": "x"`).want(t, http.StatusBadRequest, nil)
	f.post(id, `{"why": "x"}`).want(t, http.StatusBadRequest, nil)
	f.post(id, `{"reason": "x"} {}`).want(t, http.StatusBadRequest, nil)
	f.post(id, `{"reason": "`+strings.Repeat("x", maxBodyBytes)+`"}`).want(t, http.StatusRequestEntityTooLarge, nil)
	f.post(id, `{"reason": "sensor firmware resent an old value"}`).want(t, http.StatusOK, &res)
	if res.Outcome != engine.OutcomeDiscarded || res.Reason != "sensor firmware resent an old value" {
		t.Fatalf("discard: %+v", res)
	}
	f.post(id, `{"reason": "again"}`).want(t, http.StatusNotFound, nil)

	var page auditPage
	f.get("/api/v1/audit?outcome=discarded").want(t, http.StatusOK, &page)
	if len(page.Records) != 1 || page.Records[0].Ref != conflict {
		t.Fatalf("discard audit records %+v", page.Records)
	}
	var q quarantinePage
	f.get("/api/v1/quarantine").want(t, http.StatusOK, &q)
	if q.Total != 1 || q.Entries[0].ID != malformed {
		t.Fatalf("left in quarantine: %+v", q)
	}
}

func TestWrongMethodsAndPaths(t *testing.T) {
	f := newFixture(t, Config{})
	r := f.get("/api/v1/quarantine/1/release")
	r.want(t, http.StatusMethodNotAllowed, nil)
	if r.header.Get("Allow") != "POST" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	f.post("/api/v1/state", "{}").want(t, http.StatusMethodNotAllowed, nil)
	f.do("DELETE", "/api/v1/quarantine/1", "").want(t, http.StatusMethodNotAllowed, nil)
	f.get("/api/v1/nothing").want(t, http.StatusNotFound, nil)
	f.get("/api/v1/quarantine/1/explode").want(t, http.StatusNotFound, nil)
	f.do("HEAD", "/api/v1/events", "").want(t, http.StatusOK, nil) // answers, does not stream
	f.do("POST", "/api/v1/quarantine/1/release", "reason=x", "Content-Type", "application/x-www-form-urlencoded").
		want(t, http.StatusUnsupportedMediaType, nil)
}

func TestWritesNeedTheToken(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret"})
	below, _, _ := f.hold()
	path := fmt.Sprintf("/api/v1/quarantine/%d/release", below)
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Basic s3cret", "Bearer s3cret2"} {
		r := f.post(path, "", "Authorization", auth)
		r.want(t, http.StatusUnauthorized, nil)
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("401 without a Bearer challenge: %v", r.header)
		}
	}
	f.get("/api/v1/state").want(t, http.StatusOK, nil) // reads stay open
	f.post(path, "", "Authorization", "Bearer s3cret").want(t, http.StatusOK, nil)
}

func TestAuthReadsGuardsEveryRead(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret", AuthReads: true})
	for _, p := range []string{"/api/v1/state", "/api/v1/sources", "/api/v1/audit", "/api/v1/quarantine",
		"/api/v1/stats", "/api/v1/events", "/metrics"} {
		f.get(p).want(t, http.StatusUnauthorized, nil)
	}
	f.get("/api/v1/state", "Authorization", "Bearer s3cret").want(t, http.StatusOK, nil)
	f.get("/metrics", "Authorization", "Bearer s3cret").want(t, http.StatusOK, nil)
	f.get("/healthz").want(t, http.StatusOK, nil)
	f.get("/readyz").want(t, http.StatusOK, nil)
	f.get("/").want(t, http.StatusOK, nil) // the page itself holds no data
}

func TestWritesWithoutATokenOnlyOnLoopback(t *testing.T) {
	f := newFixture(t, Config{Listen: "0.0.0.0:9780"})
	below, _, _ := f.hold()
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "").want(t, http.StatusForbidden, nil)
	f.get("/api/v1/state").want(t, http.StatusOK, nil)
}

func TestLoopbackListenerRefusesForeignHostNames(t *testing.T) {
	f := newFixture(t, Config{})
	f.get("/api/v1/state", "Host", "attacker.example").want(t, http.StatusForbidden, nil)
	f.get("/api/v1/state", "Host", "localhost:9780").want(t, http.StatusOK, nil)
	f.get("/api/v1/state", "Host", "[::1]:9780").want(t, http.StatusOK, nil)
}

func TestMetricsAreServed(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(meter("m-1", "1"), meter("m-1", "1"))
	r := f.get("/metrics")
	r.want(t, http.StatusOK, nil)
	for _, want := range []string{
		`replayguard_decisions_total{outcome="duplicate",route="meters"} 1`,
		`replayguard_received_total 2`,
		`replayguard_in_flight 0`,
		`replayguard_key_window_entries 1`,
		`replayguard_build_info{commit="0000000",version="test"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestStatsCountDecisions(t *testing.T) {
	f := newFixture(t, Config{Version: "1.2.3"})
	f.process(meter("m-1", "1"), meter("m-1", "1"), meter("m-2", "1"))
	var st statsJSON
	f.get("/api/v1/stats").want(t, http.StatusOK, &st)
	if st.Version != "1.2.3" || st.Position != 3 || st.Keys == nil || *st.Keys != 2 || st.Counts == nil ||
		st.Counts.Decisions["applied"] != 2 || st.Counts.Decisions["duplicate"] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDashboardIsServedFromEmbeddedAssets(t *testing.T) {
	f := newFixture(t, Config{})
	r := f.get("/")
	r.want(t, http.StatusOK, nil)
	if !strings.Contains(string(r.body), "<title>replayguard") {
		t.Fatalf("dashboard: %.200s", r.body)
	}
	for _, a := range []string{"/assets/app.js", "/assets/style.css"} {
		f.get(a).want(t, http.StatusOK, nil)
	}
	if strings.Contains(string(r.body), "://") {
		t.Fatal("the page refers to another site; it must work offline")
	}
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func TestAQuarantinePageOfBigPayloadsEndsEarly(t *testing.T) {
	f := newFixture(t, Config{})
	big := bytes.Repeat([]byte("x"), 200<<10)
	msgs := make([]engine.Message, 50)
	for i := range msgs {
		msgs[i] = engine.Message{Topic: "incidents/fire/e7", Payload: big}
	}
	f.process(msgs...)
	var page quarantinePage
	f.get("/api/v1/quarantine?limit=1000").want(t, http.StatusOK, &page)
	want := maxPageBytes / len(big)
	if len(page.Entries) != want || page.Total != 50 || page.Next == nil || *page.Next != page.Entries[want-1].ID+1 {
		t.Fatalf("%d entries of %d, next %v; want %d and a next", len(page.Entries), page.Total, page.Next, want)
	}
}

// TestAPartOfAFleet: a dashboard asks for a part of the state and the
// sources: the first entities by name, and the sources with open gaps
// first, with how many there are in all; without limit, every one.
func TestAPartOfAFleet(t *testing.T) {
	f := newFixture(t, Config{})
	var msgs []engine.Message
	for i := range 5 {
		for _, seq := range []int{1, 2} {
			if i == 3 && seq == 2 {
				seq = 6 // 2..5 missing
			}
			msgs = append(msgs, engine.Message{Topic: fmt.Sprintf("incidents/fire/e%d", i), Payload: fmt.Appendf(nil,
				`{"agency":"fire","source_id":"e%d","boot_id":1,"sequence":%d,"incident_id":"%d","casualty_delta":1,"unit_id":"e%d","unit_status":"a"}`,
				i, seq, i, i)})
		}
	}
	f.process(msgs...)

	r := f.get("/api/v1/state?limit=3")
	var state map[string]any
	r.want(t, http.StatusOK, &state)
	if got := slices.Sorted(maps.Keys(state)); !slices.Equal(got, []string{"incident/0", "incident/1", "incident/2"}) || r.header.Get("X-Total-Count") != "10" {
		t.Fatalf("state?limit=3: %v, X-Total-Count %q; want the first 3 entities of 10", got, r.header.Get("X-Total-Count"))
	}
	r = f.get("/api/v1/sources?limit=2")
	var part []engine.SourceReport
	r.want(t, http.StatusOK, &part)
	var names []string
	for _, s := range part {
		names = append(names, strings.Join(s.Source, "/"))
	}
	if !slices.Equal(names, []string{"fire/e0", "fire/e3"}) || r.header.Get("X-Total-Count") != "5" || r.header.Get("X-Open-Gaps") != "4" {
		t.Fatalf("sources?limit=2: %v, X-Total-Count %q, X-Open-Gaps %q; want fire/e3 (its gap) and fire/e0 of 5, 4 missing",
			names, r.header.Get("X-Total-Count"), r.header.Get("X-Open-Gaps"))
	}
	var all []engine.SourceReport
	f.get("/api/v1/sources").want(t, http.StatusOK, &all)
	if len(all) != 5 {
		t.Fatalf("sources without limit: %d, want 5", len(all))
	}
	for _, bad := range []string{"limit=0", "limit=-1", "limit=two"} {
		f.get("/api/v1/state?"+bad).want(t, http.StatusBadRequest, nil)
		f.get("/api/v1/sources?"+bad).want(t, http.StatusBadRequest, nil)
	}
}
