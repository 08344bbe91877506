package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

var (
	incidents = engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
		Sequence: "sequence", Epoch: "boot_id", Effects: []engine.EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}}}}
	meters = engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}
)

const (
	primary = "tcp://primary:1883"
	standby = "tcp://standby:1883"
)

// start is the feed's first minute.
var start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// feed is an engine over a memory store with a clock the test moves, and
// what the engine decided, kept apart from anything the report computes.
type feed struct {
	t     *testing.T
	store *memory.Store
	e     *engine.Engine
	clock time.Time
	// what the engine returned, with the clock at the time
	decisions []decided
	releases  []decided
	discards  []decided
}

type decided struct {
	at  time.Time
	dec engine.Decision
	ref uint64
	by  string
}

func newFeed(t *testing.T) *feed {
	f := &feed{t: t, store: memory.New(), clock: start}
	e, err := engine.New(context.Background(), f.store, engine.Options{Routes: []engine.Route{incidents, meters},
		SequenceSpan: 64, Now: func() time.Time { return f.clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	f.e = e
	return f
}

func inc(broker, agency, src string, seq int64, casualties int) engine.Message {
	return engine.Message{Topic: "incidents/" + agency + "/" + src, Broker: broker,
		Payload: fmt.Appendf(nil, `{"agency":%q,"source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"7","casualty_delta":%d}`, agency, src, seq, casualties)}
}

func meter(broker, id, msgID, kwh string) engine.Message {
	return engine.Message{Topic: "plant/" + id + "/energy", Broker: broker, Payload: fmt.Appendf(nil, `{"msgId":%q,"kwh":%s}`, msgID, kwh)}
}

// at feeds msgs at the feed's start plus offset.
func (f *feed) at(offset time.Duration, msgs ...engine.Message) []engine.Decision {
	f.t.Helper()
	f.clock = start.Add(offset)
	ds, err := f.e.Process(context.Background(), msgs)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, d := range ds {
		f.decisions = append(f.decisions, decided{at: f.clock, dec: d})
	}
	return ds
}

// story feeds a failover: two incident sources and a meter on the primary;
// a gap; the standby replays what was applied, fills the gap late and
// opens another; a conflict an operator releases, a below-window update an
// operator releases, a malformed message an operator discards.
func story(t *testing.T) *feed {
	f := newFeed(t)
	var first []engine.Message
	for s := int64(1); s <= 5; s++ {
		first = append(first, inc(primary, "fire", "e7", s, 1), inc(primary, "ems", "m2", s, 0))
	}
	first = append(first, meter(primary, "meter-3", "m3-1", "0.25"), meter(primary, "meter-3", "m3-2", "0.5"))
	f.at(10*time.Second, first...)
	f.at(70*time.Second, inc(primary, "fire", "e7", 6, 0), inc(primary, "fire", "e7", 9, 1)) // 7..8 missing
	f.at(80*time.Second, inc(primary, "ems", "m2", 100, 0))
	// 12:02: the standby's replay burst, then the late fills and a new gap.
	var burst []engine.Message
	for s := int64(1); s <= 5; s++ {
		burst = append(burst, inc(standby, "fire", "e7", s, 1), inc(standby, "ems", "m2", s, 0))
	}
	burst = append(burst, inc(standby, "fire", "e7", 6, 0))
	burst = append(burst, meter(standby, "meter-3", "m3-1", "0.25"))
	f.at(125*time.Second, burst...)
	f.at(130*time.Second, inc(standby, "fire", "e7", 7, 0), inc(standby, "fire", "e7", 8, 0), inc(standby, "fire", "e7", 12, 0))
	// 12:03: held messages.
	held := f.at(185*time.Second,
		meter(standby, "meter-3", "m3-2", "0.75"), // same msgId, other reading: conflict
		inc(standby, "ems", "m2", 20, 3),          // 100-64 > 20: below the window
		engine.Message{Topic: "incidents/fire/e7", Broker: standby, Payload: []byte("sequence=13")}, // not JSON
	)
	// 12:05: the operators.
	f.clock = start.Add(5 * time.Minute)
	for i, who := range []string{"duty officer", "j.doe"} {
		d, err := f.e.Release(context.Background(), held[i].Position, who)
		if err != nil {
			t.Fatal(err)
		}
		f.releases = append(f.releases, decided{at: f.clock, dec: d, ref: held[i].Position, by: who})
	}
	d, err := f.e.Discard(context.Background(), held[2].Position, "bench rig noise", "j.doe")
	if err != nil {
		t.Fatal(err)
	}
	f.discards = append(f.discards, decided{at: f.clock, dec: d, ref: held[2].Position, by: "j.doe"})
	return f
}

func (f *feed) build(t *testing.T, opts report.Options) *report.Report {
	t.Helper()
	snap, err := f.store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts.Heads = map[string]engine.AuditHead{"": snap.AuditHead}
	opts.Now = func() time.Time { return start.Add(time.Hour) }
	rep, err := report.Build(report.Records(context.Background(), f.store, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// want is the per-source figures the test expects, from the decisions.
type want struct {
	outcomes                      map[string]uint64
	released, gapsOpened, missing uint64
	gapsClosed                    uint64
}

func sourceKey(route string, source []string) string { return route + " " + strings.Join(source, "/") }

func expected(f *feed, keep func(decided) bool) map[string]*want {
	out := map[string]*want{}
	get := func(d engine.Decision) *want {
		k := sourceKey(d.Route, d.Source)
		if out[k] == nil {
			out[k] = &want{outcomes: map[string]uint64{}}
		}
		return out[k]
	}
	for _, d := range f.decisions {
		if !keep(d) {
			continue
		}
		w := get(d.dec)
		w.outcomes[d.dec.Outcome.String()]++
		if g := d.dec.Gap; g != nil {
			w.gapsOpened++
			w.missing += uint64(g.To - g.From + 1)
			filled := 0
			for _, later := range f.decisions {
				if keep(later) && later.dec.Outcome.Effective() && sourceKey(later.dec.Route, later.dec.Source) == sourceKey(d.dec.Route, d.dec.Source) &&
					later.dec.Sequence >= g.From && later.dec.Sequence <= g.To {
					filled++
				}
			}
			if int64(filled) == g.To-g.From+1 {
				w.gapsClosed++
			}
		}
	}
	for _, d := range f.releases {
		if keep(d) {
			get(d.dec).released++
		}
	}
	return out
}

func checkSources(t *testing.T, rep *report.Report, exp map[string]*want) {
	t.Helper()
	got := map[string]report.SourceFigures{}
	for _, s := range rep.Sources {
		got[sourceKey(s.Route, s.Source)] = s
	}
	if len(got) != len(exp) {
		t.Errorf("%d sources in the report, want %d: %v", len(got), len(exp), rep.Sources)
	}
	for k, w := range exp {
		s, ok := got[k]
		if !ok {
			t.Errorf("source %q missing from the report", k)
			continue
		}
		g := map[string]uint64{"applied": s.Applied, "applied_late": s.AppliedLate, "duplicate": s.Duplicate,
			"conflict": s.Conflict, "quarantined": s.Quarantined, "malformed": s.Malformed}
		for o, n := range g {
			if n != w.outcomes[o] {
				t.Errorf("source %q: %s %d, want %d", k, o, n, w.outcomes[o])
			}
		}
		if s.Released != w.released || s.GapsOpened != w.gapsOpened || s.MissingSequences != w.missing || s.GapsClosed != w.gapsClosed {
			t.Errorf("source %q: released %d gaps opened %d missing %d closed %d; want %d %d %d %d", k,
				s.Released, s.GapsOpened, s.MissingSequences, s.GapsClosed, w.released, w.gapsOpened, w.missing, w.gapsClosed)
		}
	}
}

func TestTheFiguresAreTheDecisions(t *testing.T) {
	f := story(t)
	rep := f.build(t, report.Options{Store: "memory", ReadPath: "from the store", ConfigDigest: "abc"})
	all := func(decided) bool { return true }

	t.Run("the story has what the report must show", func(t *testing.T) {
		seen := map[engine.Outcome]int{}
		gaps := 0
		for _, d := range f.decisions {
			seen[d.dec.Outcome]++
			if d.dec.Gap != nil {
				gaps++
			}
		}
		if seen[engine.Duplicate] < 10 || seen[engine.AppliedLate] != 2 || seen[engine.Conflict] != 1 ||
			seen[engine.Quarantined] != 1 || seen[engine.Malformed] != 1 || gaps != 3 {
			t.Fatalf("the feed decided %v with %d gaps", seen, gaps)
		}
	})
	t.Run("per source figures match the decisions", func(t *testing.T) { checkSources(t, rep, expected(f, all)) })
	t.Run("a gap filled by late fills is closed, a gap still missing is not", func(t *testing.T) {
		for _, s := range rep.Sources {
			if sourceKey(s.Route, s.Source) == "incidents fire/e7" && (s.GapsOpened != 2 || s.GapsClosed != 1 || s.MissingSequences != 4) {
				t.Fatalf("fire/e7: %+v", s)
			}
		}
	})
	t.Run("the timeline counts the decisions of each minute and shows the replay burst", func(t *testing.T) {
		if rep.Timeline.BucketSeconds != 60 {
			t.Fatalf("bucket %ds", rep.Timeline.BucketSeconds)
		}
		wantMin := map[time.Time]map[string]uint64{}
		for _, d := range f.decisions {
			m := d.at.Truncate(time.Minute)
			if wantMin[m] == nil {
				wantMin[m] = map[string]uint64{}
			}
			wantMin[m][d.dec.Outcome.String()]++
		}
		if n := len(rep.Timeline.Buckets); n != 6 { // 12:00 to the operators' last record at 12:05
			t.Fatalf("%d buckets: %+v", n, rep.Timeline.Buckets)
		}
		peak := report.Bucket{}
		for _, b := range rep.Timeline.Buckets {
			w := wantMin[b.Start]
			got := map[string]uint64{"applied": b.Applied, "applied_late": b.AppliedLate, "duplicate": b.Duplicate,
				"conflict": b.Conflict, "quarantined": b.Quarantined, "malformed": b.Malformed}
			for o, n := range got {
				if n != w[o] {
					t.Errorf("minute %s: %s %d, want %d", b.Start.Format("15:04"), o, n, w[o])
				}
			}
			if b.Duplicate > peak.Duplicate {
				peak = b
			}
		}
		if !peak.Start.Equal(start.Add(2 * time.Minute)) {
			t.Errorf("the duplicates peak at %s, want the failover's minute 12:02", peak.Start.Format("15:04"))
		}
	})
	t.Run("the broker changes are the failover", func(t *testing.T) {
		got := rep.BrokerChanges
		if len(got) != 2 || got[0].From != "" || got[0].To != primary || got[1].From != primary || got[1].To != standby ||
			!got[1].Time.Equal(start.Add(125*time.Second)) {
			t.Fatalf("broker changes %+v", got)
		}
	})
	t.Run("every held decision is listed with its resolution", func(t *testing.T) {
		res := map[uint64]decided{}
		for _, d := range append(slices.Clone(f.releases), f.discards...) {
			res[d.ref] = d
		}
		var held []engine.Decision
		for _, d := range f.decisions {
			if d.dec.Outcome.Held() {
				held = append(held, d.dec)
			}
		}
		if len(rep.Quarantine) != len(held) {
			t.Fatalf("%d quarantine items, want %d", len(rep.Quarantine), len(held))
		}
		for i, q := range rep.Quarantine {
			h := held[i]
			r := res[h.Position]
			if q.ID != h.Position || q.Outcome != h.Outcome.String() || q.Resolved == nil || q.Resolved.Operator != r.by ||
				q.Resolved.Position != r.dec.Position {
				t.Fatalf("item %+v (resolution %+v), want held %+v resolved by %+v", q, q.Resolved, h, r)
			}
			switch q.Outcome {
			case "malformed":
				if q.Status != "discarded" || q.Resolved.Reason != "bench rig noise" {
					t.Errorf("the malformed message: %+v %+v", q, q.Resolved)
				}
			default:
				if q.Status != "released" || q.Resolved.Outcome != r.dec.Outcome.String() {
					t.Errorf("%s: %+v %+v, want released as %s", q.Outcome, q, q.Resolved, r.dec.Outcome)
				}
			}
		}
	})
	t.Run("the chain verifies to the store's head", func(t *testing.T) {
		snap, _ := f.store.Load(context.Background())
		n, err := audit.Verify(context.Background(), f.store, snap.AuditHead)
		v := rep.Verification
		if err != nil || !v.Intact || !v.HeadChecked || len(v.Chains) != 1 || v.Chains[0].Records != n ||
			v.Chains[0].HeadHash != snap.AuditHead.Hash.String() || v.Chains[0].HeadPosition != snap.AuditHead.Position {
			t.Fatalf("verification %+v; audit.Verify %d %v, head %+v", v, n, err, snap.AuditHead)
		}
	})
	t.Run("the totals are the sum of the sources", func(t *testing.T) {
		var sum report.Counts
		for _, s := range rep.Sources {
			sum.Applied += s.Applied
			sum.Duplicate += s.Duplicate
			sum.Released += s.Released
		}
		if sum.Applied != rep.Totals.Applied || sum.Duplicate != rep.Totals.Duplicate || sum.Released != rep.Totals.Released || rep.Totals.Discarded != 1 {
			t.Fatalf("totals %+v, sources sum to %+v", rep.Totals, sum)
		}
	})
}

func TestFilters(t *testing.T) {
	f := story(t)
	t.Run("from and to keep the decisions of the period", func(t *testing.T) {
		from, to := start.Add(2*time.Minute), start.Add(4*time.Minute)
		rep := f.build(t, report.Options{From: from, To: to})
		in := func(d decided) bool { return !d.at.Before(from) && d.at.Before(to) }
		checkSources(t, rep, expected(f, in))
		// Two minutes: bars of seconds, from the period's start to its end.
		tl, total, want := rep.Timeline, uint64(0), 0
		for _, b := range tl.Buckets {
			total += b.Total()
		}
		for _, d := range f.decisions {
			if in(d) {
				want++
			}
		}
		if tl.BucketSeconds != 2 || len(tl.Buckets) != 60 || !tl.Buckets[0].Start.Equal(from) || total != uint64(want) {
			t.Fatalf("timeline of %ds bars, %d of them from %s, %d decisions (want %d)", tl.BucketSeconds, len(tl.Buckets), tl.Buckets[0].Start, total, want)
		}
		if len(rep.BrokerChanges) != 1 || rep.BrokerChanges[0].To != standby {
			t.Fatalf("broker changes %+v", rep.BrokerChanges)
		}
		// Resolved after the period: the resolution is still shown.
		if len(rep.Quarantine) != 3 || rep.Quarantine[0].Resolved == nil {
			t.Fatalf("quarantine %+v", rep.Quarantine)
		}
		if !rep.Verification.Intact || rep.Verification.Chains[0].Records != uint64(len(f.decisions)+3) {
			t.Fatalf("the chain is verified whole whatever the period: %+v", rep.Verification)
		}
	})
	t.Run("route keeps one route's decisions", func(t *testing.T) {
		rep := f.build(t, report.Options{Route: "meters"})
		checkSources(t, rep, expected(f, func(d decided) bool { return d.dec.Route == "meters" }))
		if len(rep.Quarantine) != 1 || rep.Quarantine[0].Outcome != "conflict" {
			t.Fatalf("quarantine %+v", rep.Quarantine)
		}
		if rep.Totals.Discarded != 0 { // the discarded message was an incident's
			t.Fatalf("totals %+v", rep.Totals)
		}
	})
	t.Run("a period with nothing in it is an empty report", func(t *testing.T) {
		rep := f.build(t, report.Options{From: start.Add(-time.Hour), To: start.Add(-59 * time.Minute)})
		if rep.Totals.Total() != 0 || len(rep.Sources) != 0 || len(rep.Quarantine) != 0 || len(rep.Timeline.Buckets) == 0 {
			t.Fatalf("%+v", rep)
		}
		for _, b := range rep.Timeline.Buckets {
			if b.Total() != 0 {
				t.Fatalf("a bar in an empty period: %+v", b)
			}
		}
	})
}

func TestAlteredRecordIsReportedBroken(t *testing.T) {
	f := story(t)
	snap, _ := f.store.Load(context.Background())
	altered := func(yield func(engine.AuditRecord, error) bool) {
		for r, err := range report.Records(context.Background(), f.store, nil) {
			if r.Position == 12 {
				r.Outcome = "applied" // was a duplicate, or anything: the hash no longer matches
				r.Reason = "altered"
			}
			if !yield(r, err) {
				return
			}
		}
	}
	rep, err := report.Build(altered, report.Options{Heads: map[string]engine.AuditHead{"": snap.AuditHead}})
	if err != nil {
		t.Fatal(err)
	}
	v := rep.Verification
	if v.Intact || !strings.Contains(v.Chains[0].Broken, "position 12") {
		t.Fatalf("verification %+v", v)
	}
	var tail iter.Seq2[engine.AuditRecord, error] = func(yield func(engine.AuditRecord, error) bool) {
		for r, err := range report.Records(context.Background(), f.store, nil) {
			if r.Position < snap.AuditHead.Position && !yield(r, err) {
				return
			}
		}
	}
	rep, err = report.Build(tail, report.Options{Heads: map[string]engine.AuditHead{"": snap.AuditHead}})
	if err != nil || rep.Verification.Intact || !strings.Contains(rep.Verification.Chains[0].Broken, "chain head") {
		t.Fatalf("a removed last record: %+v, %v", rep.Verification, err)
	}
}

func TestJSONCarriesTheFigures(t *testing.T) {
	rep := story(t).build(t, report.Options{ConfigDigest: "d1"})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back report.Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if !bytes.Equal(b, b2) {
		t.Fatalf("the JSON does not round-trip:\n%s\n%s", b, b2)
	}
	for _, k := range []string{`"applied_late":`, `"gaps_opened":`, `"gaps_closed":`, `"broker_changes":`, `"resolution":`, `"operator":"duty officer"`, `"head_hash":`, `"config_digest":"d1"`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	f := story(t)
	rep := f.build(t, report.Options{Store: "memory", ReadPath: "from the store", ConfigDigest: strings.Repeat("ab", 32)})
	var err error
	if rep.Lineages, err = report.Lineages(report.Records(context.Background(), f.store, nil), report.LineageOptions{Entities: []string{"meter/meter-3", "incident/7"}}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"http://", "https://", "<script", "<link", "src=", "@import", "url("} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
		t.Error("not a whole HTML document")
	}
	checkWellFormed(t, page)
	bars := regexp.MustCompile(`<rect class="bar o-(\w+)"`).FindAllStringSubmatch(page, -1)
	kinds := map[string]bool{}
	for _, m := range bars {
		kinds[m[1]] = true
	}
	for _, o := range []string{"applied", "applied_late", "duplicate", "conflict", "quarantined", "malformed"} {
		if !kinds[o] {
			t.Errorf("no %s bar in the timeline", o)
		}
	}
	// The most replayed entities link to their lineage sections.
	for _, s := range []string{`<tr data-entity="incident/7"><td class="mono">incident/7</td><td class="n">11</td><td><a href="#lineage-1">lineage</a>`,
		`<h2 id="lineage-0" class="lineage" data-entity="meter/meter-3">`, `<h2 id="lineage-1" class="lineage" data-entity="incident/7">`,
		`<b>kwh</b> add <code>0.5</code> → <code>0.75</code>`, `conflict #31`} {
		if !strings.Contains(page, s) {
			t.Errorf("the page does not hold %s", s)
		}
	}
	for _, s := range []string{"duty officer", "bench rig noise", standby, strings.Repeat("ab", 32), rep.Verification.Chains[0].HeadHash} {
		if !strings.Contains(page, s) {
			t.Errorf("the page does not show %q", s)
		}
	}
}

// checkWellFormed checks that every element the page opens is closed, in
// order (void elements and self-closed SVG elements aside), and that every
// attribute is quoted.
func checkWellFormed(t *testing.T, page string) {
	t.Helper()
	void := map[string]bool{"meta": true, "br": true, "hr": true, "img": true, "input": true, "link": true}
	tag := regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z][a-zA-Z0-9-]*="[^"]*")*)\s*(/?)>`)
	body := regexp.MustCompile(`(?s)<style>.*?</style>`).ReplaceAllString(page, "<style></style>")
	var stack []string
	rest := strings.TrimPrefix(body, "<!DOCTYPE html>")
	for _, m := range tag.FindAllStringSubmatchIndex(rest, -1) {
		closing, name, self := rest[m[2]:m[3]] == "/", rest[m[4]:m[5]], rest[m[8]:m[9]] == "/"
		switch {
		case self || (void[name] && !closing):
		case closing:
			if len(stack) == 0 || stack[len(stack)-1] != name {
				t.Fatalf("</%s> closes %v", name, stack)
			}
			stack = stack[:len(stack)-1]
		default:
			stack = append(stack, name)
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed elements: %v", stack)
	}
	if stray := tag.ReplaceAllString(rest, ""); strings.Contains(stray, "<") {
		i := strings.Index(stray, "<")
		t.Fatalf("a '<' outside a well-formed tag: %q", stray[max(0, i-40):min(len(stray), i+80)])
	}
}

func TestAShortFeedIsDrawnInSeconds(t *testing.T) {
	f := newFeed(t)
	f.at(time.Second, inc(primary, "fire", "e7", 1, 1), inc(primary, "fire", "e7", 2, 1))
	f.at(3*time.Second, inc(standby, "fire", "e7", 1, 1), inc(standby, "fire", "e7", 2, 1))
	rep := f.build(t, report.Options{})
	tl := rep.Timeline
	if tl.BucketSeconds != 1 || len(tl.Buckets) != 3 || tl.Buckets[0].Applied != 2 || tl.Buckets[2].Duplicate != 2 || tl.Buckets[1].Total() != 0 {
		t.Fatalf("timeline %+v", tl)
	}
}
