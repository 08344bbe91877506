package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// lineageRoutes add, set and max fields, so a lineage has each kind.
var lineageRoutes = []engine.Route{
	{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"}, Sequence: "sequence", Epoch: "boot_id",
		Effects: []engine.EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"},
			Set: map[string]string{"status": "status"}}}},
	{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}, Max: map[string]string{"peak": "kw"}}}},
}

// lineageFeed decides a random feed with replays and late arrivals, one
// batch a second, and returns the store, the state after batch mid with
// its time, and the final state.
func lineageFeed(t *testing.T, seed uint64, mid int) (s *memory.Store, midAt time.Time, midState, final map[string]map[string]json.RawMessage) {
	t.Helper()
	ctx := context.Background()
	s = memory.New()
	clock := start
	e, err := engine.New(ctx, s, engine.Options{Routes: lineageRoutes, SequenceSpan: 64, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	var sent []engine.Message
	seqs := map[string]int64{}
	statuses := []string{"reported", "contained", "under <control>", "closed"}
	for batch := range 60 {
		var msgs []engine.Message
		for range 8 {
			switch n := rng.IntN(10); {
			case n < 2 && len(sent) > 0: // a replay
				msgs = append(msgs, sent[rng.IntN(len(sent))])
			case n < 6:
				src := fmt.Sprintf("e%d", rng.IntN(3))
				seqs[src]++
				seq := seqs[src]
				if rng.IntN(6) == 0 { // skip one: a gap a later message may fill
					seqs[src]++
				}
				m := engine.Message{Topic: "incidents/fire/" + src, Payload: fmt.Appendf(nil,
					`{"agency":"fire","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"%d","casualty_delta":%d,"status":%q}`,
					src, seq, rng.IntN(3), rng.IntN(5)-1, statuses[rng.IntN(len(statuses))])}
				msgs = append(msgs, m)
				sent = append(sent, m)
				if seqs[src] > seq && rng.IntN(2) == 0 { // the skipped one, late
					late := engine.Message{Topic: m.Topic, Payload: fmt.Appendf(nil,
						`{"agency":"fire","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"%d","casualty_delta":1,"status":"late"}`,
						src, seq+1, rng.IntN(3))}
					msgs = append(msgs, late)
					sent = append(sent, late)
				}
			default:
				m := engine.Message{Topic: fmt.Sprintf("plant/m%d/energy", rng.IntN(3)), Payload: fmt.Appendf(nil,
					`{"msgId":"r%d","kwh":%d.%02d,"kw":%d}`, len(sent), rng.IntN(3), rng.IntN(100), rng.IntN(50))}
				msgs = append(msgs, m)
				sent = append(sent, m)
			}
		}
		clock = start.Add(time.Duration(batch) * time.Second)
		if _, err := e.Process(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		if batch == mid {
			midAt, midState = clock, engine.StateJSON(e.State())
		}
	}
	return s, midAt, midState, engine.StateJSON(e.State())
}

// For every entity, the values of its `add` lineage sum to its state, its
// `set` lineage ends at its state, and the lineage's state is the entity's;
// `At` a moment gives the state captured then.
func TestLineageAddsUpToTheState(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			s, midAt, midState, final := lineageFeed(t, seed, 25)
			names := slices.Sorted(maps.Keys(final))
			ls, err := report.Lineages(report.Records(ctx, s, nil), report.LineageOptions{Entities: names})
			if err != nil {
				t.Fatal(err)
			}
			suppressed := 0
			for _, l := range ls {
				checkLineage(t, l, final[l.Entity])
				suppressed += l.Suppressed
			}
			if suppressed == 0 {
				t.Fatal("the feed's replays suppressed none: the test proves nothing")
			}
			// Kept while reading, the last few changes are those the whole
			// lineage trimmed would hold, with their replays and held
			// messages, and the counts and state are the whole lineage's.
			for _, keep := range []int{1, 3, 7} {
				kept, err := report.Lineages(report.Records(ctx, s, nil), report.LineageOptions{Entities: names, Keep: keep})
				if err != nil {
					t.Fatal(err)
				}
				for i, l := range kept {
					whole := *ls[i]
					whole.Changes = slices.Clone(whole.Changes)
					whole.Trim(keep)
					if got, want := jsonOf(l), jsonOf(&whole); got != want {
						t.Errorf("%s kept %d while read:\n%s\nthe whole lineage trimmed:\n%s", l.Entity, keep, got, want)
					}
				}
			}
			at, err := report.Lineages(report.Records(ctx, s, nil), report.LineageOptions{Entities: names, At: midAt})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range at {
				if !equalState(l.State, midState[l.Entity]) {
					t.Errorf("%s at %s: lineage state %s, state then %s", l.Entity, midAt, jsonOf(l.State), jsonOf(midState[l.Entity]))
				}
				for _, c := range l.Changes {
					if c.Time.After(midAt) {
						t.Errorf("%s at %s lists a change at %s", l.Entity, midAt, c.Time)
					}
				}
			}
		})
	}
}

// checkLineage holds l to the entity's state: adds sum to it, the last
// set that won is it, a max is the largest value brought.
func checkLineage(t *testing.T, l *report.Lineage, state map[string]json.RawMessage) {
	t.Helper()
	if !equalState(l.State, state) {
		t.Errorf("%s: lineage state %s, state %s", l.Entity, jsonOf(l.State), jsonOf(state))
	}
	sums := map[string]*apd.Decimal{}
	sets := map[string]json.RawMessage{}
	for _, c := range l.Changes {
		if c.Key == "" || (c.Outcome != "applied" && c.Outcome != "applied_late") {
			t.Errorf("%s: change %d: key %q, outcome %s", l.Entity, c.Position, c.Key, c.Outcome)
		}
		for _, s := range c.Suppressed {
			if s.Outcome != "duplicate" || s.Position <= c.Position {
				t.Errorf("%s: change %d lists %s at %d as suppressed", l.Entity, c.Position, s.Outcome, s.Position)
			}
		}
		for _, e := range c.Effects {
			if e.Entity != l.Entity {
				t.Errorf("%s: change %d has an effect on %s", l.Entity, c.Position, e.Entity)
			}
			switch e.Op {
			case "add":
				if sums[e.Field] == nil {
					sums[e.Field] = new(apd.Decimal)
				}
				var v apd.Decimal
				if _, _, err := v.SetString(string(e.Value)); err != nil {
					t.Fatal(err)
				}
				if _, err := apd.BaseContext.WithPrecision(34).Add(sums[e.Field], sums[e.Field], &v); err != nil {
					t.Fatal(err)
				}
				if !sameNumber(t, sums[e.Field], e.After) {
					t.Errorf("%s: change %d: %s after %s, the adds so far sum to %s", l.Entity, c.Position, e.Field, e.After, sums[e.Field])
				}
			case "set":
				if !e.Lost && string(e.After) != string(e.Value) || e.Lost && string(e.After) != string(sets[e.Field]) {
					t.Errorf("%s: change %d: set %s → %s (before: %s) marked lost=%v", l.Entity, c.Position, e.Value, e.After, sets[e.Field], e.Lost)
				}
				sets[e.Field] = e.After
			}
		}
	}
	for f, sum := range sums {
		if !sameNumber(t, sum, state[f]) {
			t.Errorf("%s: the adds to %s sum to %s, its state is %s", l.Entity, f, sum, state[f])
		}
	}
	for f, v := range sets {
		if string(v) != string(state[f]) {
			t.Errorf("%s: the set lineage of %s ends at %s, its state is %s", l.Entity, f, v, state[f])
		}
	}
}

func sameNumber(t *testing.T, d *apd.Decimal, raw json.RawMessage) bool {
	t.Helper()
	var v apd.Decimal
	if _, _, err := v.SetString(string(raw)); err != nil {
		return false
	}
	return d.Cmp(&v) == 0
}

func equalState(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return string(x) == string(y) })
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The story's lineage of meter-3 shows the conflict beside the reading it
// conflicted with, and the operator who released it; that of incident/7
// shows a below-window update held, then released by an operator and
// applied, and the standby's replays suppressed beside the readings they
// repeated.
func TestLineageShowsReplaysHeldMessagesAndOperators(t *testing.T) {
	f := story(t)
	ctx := context.Background()
	ls, err := report.Lineages(report.Records(ctx, f.store, nil), report.LineageOptions{Entities: []string{"meter/meter-3", "incident/7"}})
	if err != nil {
		t.Fatal(err)
	}
	meter, inc := ls[0], ls[1]
	if len(meter.Changes) != 2 || meter.Suppressed != 1 {
		t.Fatalf("meter-3: %d changes, %d suppressed: %s", len(meter.Changes), meter.Suppressed, jsonOf(meter))
	}
	m1, m2 := meter.Changes[0], meter.Changes[1]
	if len(m1.Suppressed) != 1 || m1.Suppressed[0].Broker != standby || m1.Effects[0].Value == nil {
		t.Errorf("meter-3's first reading: suppressed %s", jsonOf(m1.Suppressed))
	}
	// m3-2's conflict, then its release by the duty officer (a duplicate:
	// its key was applied): an operator's decision on the held entry, no
	// replay suppressed.
	if len(m2.Held) != 2 || m2.Held[0].Outcome != "conflict" || len(m2.Suppressed) != 0 || m2.Held[1].Operator != "duty officer" || m2.Held[1].Ref != m2.Held[0].Position {
		t.Errorf("meter-3's second reading: held %s, suppressed %s", jsonOf(m2.Held), jsonOf(m2.Suppressed))
	}
	var released *report.Change
	for i, c := range inc.Changes {
		if c.Ref != 0 {
			released = &inc.Changes[i]
		}
	}
	if released == nil || released.Operator != "j.doe" || len(released.Held) != 1 || released.Held[0].Position != released.Ref || released.Held[0].Outcome != "quarantined" {
		t.Fatalf("incident/7's released update: %s", jsonOf(released))
	}
	if inc.Suppressed != 11 {
		t.Errorf("incident/7: %d replays suppressed, want the standby's 11", inc.Suppressed)
	}
	if len(inc.Changes) == 0 || inc.Read.WithoutEffects != 0 {
		t.Errorf("incident/7: %d changes, read %+v", len(inc.Changes), inc.Read)
	}
	if _, err := report.Lineages(report.Records(ctx, f.store, nil), report.LineageOptions{}); err == nil {
		t.Error("a lineage of no entity: no error")
	}
}

// The report lists the entities with the most replays suppressed in its
// period.
func TestReportListsTheMostReplayedEntities(t *testing.T) {
	f := story(t)
	rep := f.build(t, report.Options{})
	want := []report.EntityReplays{{Entity: "incident/7", Suppressed: 11}, {Entity: "meter/meter-3", Suppressed: 1}} // and the duty officer's release
	if jsonOf(rep.Replayed) != jsonOf(want) {
		t.Errorf("replayed %s, want %s", jsonOf(rep.Replayed), jsonOf(want))
	}
	rep = f.build(t, report.Options{To: start.Add(2 * time.Minute)}) // before the standby's burst
	if len(rep.Replayed) != 0 {
		t.Errorf("replayed before the burst: %s", jsonOf(rep.Replayed))
	}
}

// A chain read with positions missing (at its start: retention archived
// them and no archive was given; inside: trimmed while read) is an error,
// never a shorter lineage.
func TestALineageWithPositionsMissingIsAnError(t *testing.T) {
	at := func(pos ...uint64) []engine.AuditRecord {
		var recs []engine.AuditRecord
		for _, p := range pos {
			recs = append(recs, engine.AuditRecord{Position: p, Member: "m1", Outcome: "applied",
				Effects: []engine.Change{{Entity: "meter/a", Field: "kwh", Op: "add", Value: json.RawMessage("1"), After: json.RawMessage("1")}}})
		}
		return sealed(recs)
	}
	for name, c := range map[string]struct {
		recs []engine.AuditRecord
		want string
	}{
		"a trimmed start": {at(7, 8), `member "m1"'s chain begins at position 7 in the store: positions 1..6 are not in it`},
		"a hole":          {at(1, 2, 5), `member "m1"'s chain: positions 3..4 were not read`},
	} {
		_, err := report.Lineages(report.Scanned(scan(c.recs)), report.LineageOptions{Entities: []string{"meter/a"}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := report.Lineages(report.Scanned(scan(at(1, 2, 3))), report.LineageOptions{Entities: []string{"meter/a"}}); err != nil {
		t.Errorf("a whole chain: %v", err)
	}
}

// sealed links recs into a chain, each after the one before it, as a
// store writes them: a lineage reads records whose hashes match.
func sealed(recs []engine.AuditRecord) []engine.AuditRecord {
	var prev engine.Hash
	for i := range recs {
		engine.Seal(&recs[i], prev)
		prev = recs[i].Hash
	}
	return recs
}

// A key applied twice (its window entry expired in between) has a change
// each time; a later duplicate belongs to the later change alone, and
// counts once. An entity named twice is one lineage.
func TestADuplicateBelongsToTheLastChangeOfItsKey(t *testing.T) {
	key := engine.Hash{1}
	rec := func(pos uint64, outcome string, effects bool) engine.AuditRecord {
		r := engine.AuditRecord{Position: pos, Outcome: outcome, Key: key, Feed: "b"}
		if effects {
			r.Effects = []engine.Change{{Entity: "meter/a", Field: "kwh", Op: "add", Value: json.RawMessage("1"), After: json.RawMessage(fmt.Sprint(pos))}}
		}
		return r
	}
	recs := sealed([]engine.AuditRecord{rec(1, "applied", true), rec(2, "duplicate", false), rec(3, "applied", true), rec(4, "duplicate", false)})
	ls, err := report.Lineages(report.Scanned(scan(recs)), report.LineageOptions{Entities: []string{"meter/a", "meter/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if ls[0] != ls[1] {
		t.Fatal("an entity named twice gave two lineages")
	}
	l := ls[0]
	if l.Suppressed != 2 || len(l.Changes) != 2 || len(l.Changes[0].Suppressed) != 1 || l.Changes[0].Suppressed[0].Position != 2 ||
		len(l.Changes[1].Suppressed) != 1 || l.Changes[1].Suppressed[0].Position != 4 || l.Changes[1].Suppressed[0].Feed != "b" {
		t.Fatalf("lineage %s", jsonOf(l))
	}
}

// A section trimmed to its last changes says how many it leaves out and
// where to read them all.
func TestATrimmedSectionSaysWhatItLeavesOut(t *testing.T) {
	f := story(t)
	rep := f.build(t, report.Options{})
	ls, err := report.Lineages(report.Records(context.Background(), f.store, nil), report.LineageOptions{Entities: []string{"incident/7"}})
	if err != nil {
		t.Fatal(err)
	}
	all := len(ls[0].Changes)
	last := ls[0].Changes[all-1].Position
	ls[0].Trim(3)
	if len(ls[0].Changes) != 3 || ls[0].Omitted != all-3 || ls[0].Changes[2].Position != last {
		t.Fatalf("trimmed to %d changes, %d omitted, the last at %d", len(ls[0].Changes), ls[0].Omitted, ls[0].Changes[2].Position)
	}
	rep.Lineages = ls
	var b strings.Builder
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("The last 3 changes; %d earlier ones are left out here: <code>replayguard explain incident/7</code> lists every one.", all-3); !strings.Contains(b.String(), want) {
		t.Fatalf("the page does not say %q", want)
	}
}

// A trimmed section counts the whole lineage: its changes as its replays
// suppressed, not the last changes it shows of them.
func TestATrimmedSectionCountsEveryChange(t *testing.T) {
	f := story(t)
	rep := f.build(t, report.Options{})
	ls, err := report.Lineages(report.Records(context.Background(), f.store, nil), report.LineageOptions{Entities: []string{"incident/7"}})
	if err != nil {
		t.Fatal(err)
	}
	all, suppressed := len(ls[0].Changes), ls[0].Suppressed
	ls[0].Trim(3)
	rep.Lineages = ls
	var b strings.Builder
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d changes, %d replays suppressed.", all, suppressed); all <= 3 || !strings.Contains(b.String(), want) {
		t.Fatalf("%d changes trimmed to 3: the page does not say %q", all, want)
	}
}
