package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// flaky fails the Update calls it is told to, after deciding: a write that
// never reached the store.
type flaky struct {
	sharedBackend
	fail int // Update calls left to fail
}

type sharedBackend interface {
	engine.SharedStore
	engine.QuarantineScanner
}

// Capabilities declares the wrapper in the store's place.
func (f *flaky) Capabilities() engine.Capabilities {
	c := f.sharedBackend.Capabilities()
	c.Shared = f
	return c
}

var errWrite = errors.New("the write did not reach the store")

func (f *flaky) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if f.fail > 0 {
		f.fail--
		if _, err := decide(&engine.Rows{}); err != nil {
			return err
		}
		return errWrite
	}
	return f.sharedBackend.Update(ctx, r, decide)
}

func meterReading(i int) engine.Message {
	return engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, i)}
}

func TestASharedBatchThatFailedIsDecidedAgain(t *testing.T) {
	ctx := context.Background()
	g := memory.NewGroup(0, 0)
	m, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	st := &flaky{sharedBackend: m}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{meterRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Process(ctx, []engine.Message{meterReading(1)}); err != nil {
		t.Fatal(err)
	}
	st.fail = 1
	if _, err := e.Process(ctx, []engine.Message{meterReading(2), meterReading(1)}); !errors.Is(err, errWrite) {
		t.Fatalf("Process = %v, want the store's error", err)
	}
	ds, err := e.Process(ctx, []engine.Message{meterReading(2), meterReading(1)})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Duplicate || ds[0].Position != 2 {
		t.Fatalf("decided again: %+v", ds)
	}
	res, err := audit.VerifyChains(ctx, m, nil)
	if err != nil || len(res) != 1 || res[0].Records != 3 {
		t.Fatalf("chains %+v, %v: want one intact chain of 3 records", res, err)
	}
	if st, err := e.ReadState(ctx); err != nil || len(st) != 1 || st[0].Fields.Get("kwh").Num != "0.5" {
		t.Fatalf("state %+v, %v: want 0.5 kWh", st, err)
	}
}

func TestEveryRecordOfASharedStoreNamesItsMember(t *testing.T) {
	ctx := context.Background()
	g := memory.NewGroup(0, 0)
	m, _ := g.Open("plant-a-1")
	e, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{meterRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bad := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-9","kwh":"x"}`)}
	ds, err := e.Process(ctx, []engine.Message{meterReading(1), bad})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discard(ctx, m.QuarantineBase()+ds[1].Position, "bench noise", "j.doe"); err != nil {
		t.Fatalf("discard by the group-unique id: %v", err)
	}
	n := 0
	m.ScanAudit(ctx, 1, func(r engine.AuditRecord) error {
		n++
		if r.Member != "plant-a-1" {
			t.Errorf("record %d names member %q", r.Position, r.Member)
		}
		return nil
	})
	if n != 3 || e.Member() != "plant-a-1" {
		t.Fatalf("%d records, member %q", n, e.Member())
	}
}

// holding stands for other members whose batches hold rows: each Update
// asked with Reads.SkipHeld takes the next of holds, leaves its rows out
// of the rows it reads and names them held, as a store does that skips
// locked rows.
type holding struct {
	sharedBackend
	holds  []engine.HeldRows // the rows held at each Update asked with SkipHeld, in turn
	skips  []bool            // Reads.SkipHeld of each Update
	failAt int               // the Update (counted from 1) that fails, writing nothing; 0: none
	// meanwhile runs before each Update that finds rows held: the
	// members holding them decide and commit.
	meanwhile func()
}

func (h *holding) Capabilities() engine.Capabilities {
	c := h.sharedBackend.Capabilities()
	c.Shared = h
	return c
}

func (h *holding) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	h.skips = append(h.skips, r.SkipHeld)
	if len(h.skips) == h.failAt {
		return errWrite
	}
	if !r.SkipHeld || len(h.holds) == 0 {
		return h.sharedBackend.Update(ctx, r, decide)
	}
	hold := h.holds[0]
	h.holds = h.holds[1:]
	if h.meanwhile != nil {
		h.meanwhile()
	}
	return h.sharedBackend.Update(ctx, r, func(rows *engine.Rows) (*engine.Batch, error) {
		rows.Sources = slices.DeleteFunc(rows.Sources, func(s engine.SourceState) bool { return slices.Contains(hold.Sources, s.ID()) })
		rows.Entities = slices.DeleteFunc(rows.Entities, func(e engine.EntityState) bool { return slices.Contains(hold.Entities, e.Name) })
		rows.Held = engine.HeldRows{
			Sources:  slices.DeleteFunc(slices.Clone(hold.Sources), func(id string) bool { return !slices.Contains(r.Sources, id) }),
			Entities: slices.DeleteFunc(slices.Clone(hold.Entities), func(n string) bool { return !slices.Contains(r.Entities, n) }),
		}
		return decide(rows)
	})
}

// processHolding decides batch on a member whose store holds the rows of
// holds in turn (holding), checks the Reads.SkipHeld each Update was asked
// with against wantSkips, and returns the engine (closed when the test
// ends), its store and the decisions.
func processHolding(t *testing.T, holds []engine.HeldRows, batch []engine.Message, wantSkips []bool) (*engine.Engine, *memory.Member, []engine.Decision) {
	t.Helper()
	ctx := context.Background()
	m, _ := memory.NewGroup(0, 0).Open("m1")
	st := &holding{sharedBackend: m, holds: holds}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	st.skips = nil
	got, err := e.Process(ctx, slices.Clone(batch))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.skips, wantSkips) {
		t.Fatalf("updates asked with SkipHeld %v, want %v", st.skips, wantSkips)
	}
	return e, m, got
}

// unitUpdate is an incident update from unit src of fire agency "fd".
func unitUpdate(src string, seq int, incident string, delta int) engine.Message {
	return engine.Message{Topic: "incidents/fire", Payload: fmt.Appendf(nil,
		`{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":%q,"casualty_delta":%d,"unit_id":%q,"unit_status":"s%d"}`,
		src, seq, incident, delta, src, seq)}
}

func TestABatchLeavesWhatTouchesRowsAnotherMemberHoldsToABatchAfterIt(t *testing.T) {
	ctx := context.Background()
	src := func(unit string) string {
		s := engine.SourceState{Route: "incidents", Source: []string{"fd", unit}}
		return s.ID()
	}
	batch := []engine.Message{
		unitUpdate("e1", 1, "7", 1), // 0: its source is held
		unitUpdate("e2", 1, "8", 2), // 1
		unitUpdate("e1", 2, "7", 1), // 2: the same source, after 0
		unitUpdate("e3", 1, "7", 5), // 3: the incident 0 and 2 add to
		unitUpdate("e2", 1, "8", 2), // 4: a replay of 1
		unitUpdate("e4", 1, "9", 3), // 5
		unitUpdate("e5", 1, "9", 1), // 6: its unit's entity is held
	}
	for _, tc := range []struct {
		name      string
		hold      engine.HeldRows
		first     []int  // the deliveries in the first batch, in order
		wantSkips []bool // Reads.SkipHeld of each Update
	}{
		// The part after one that decided something skips held rows again
		// (none are held by then); after one that decided nothing, it waits.
		{"rows held", engine.HeldRows{Sources: []string{src("e1")}, Entities: []string{"unit/e5"}}, []int{1, 4, 5}, []bool{true, true}},
		{"every row held", engine.HeldRows{Sources: []string{src("e1"), src("e2"), src("e3"), src("e4"), src("e5")}}, nil, []bool{true, false}},
		{"held rows the batch does not name", engine.HeldRows{Sources: []string{src("e9")}}, []int{0, 1, 2, 3, 4, 5, 6}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same batch on a member whose rows nobody holds.
			ref, _ := memory.NewGroup(0, 0).Open("m1")
			re, err := engine.New(ctx, ref, engine.Options{Routes: []engine.Route{incidentRoute}})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			want, err := re.Process(ctx, slices.Clone(batch))
			if err != nil {
				t.Fatal(err)
			}

			e, m, got := processHolding(t, []engine.HeldRows{tc.hold}, batch, tc.wantSkips)
			// Every delivery has the outcome it has where nothing is held;
			// the first batch's come first in the chain, each part in
			// delivery order.
			order := slices.Clone(tc.first)
			for i := range batch {
				if !slices.Contains(tc.first, i) {
					order = append(order, i)
				}
			}
			for pos, i := range order {
				if got[i].Outcome != want[i].Outcome || got[i].Position != uint64(pos+1) {
					t.Errorf("delivery %d: %s at position %d, want %s at %d", i, got[i].Outcome, got[i].Position, want[i].Outcome, pos+1)
				}
			}
			gs, _ := e.ReadState(ctx)
			ws, _ := re.ReadState(ctx)
			if !reflect.DeepEqual(entityValues(gs), entityValues(ws)) {
				t.Errorf("state %v, want %v", entityValues(gs), entityValues(ws))
			}
			res, err := audit.VerifyChains(ctx, m, nil)
			if err != nil || len(res) != 1 || res[0].Records != uint64(len(batch)) {
				t.Fatalf("chains %+v, %v: want one intact chain of %d records", res, err, len(batch))
			}
		})
	}
}

// TestHeldRowsAreSkippedPartAfterPartThenWaitedFor: while each part of a
// batch decides something, the part after it leaves out the rows still
// held, up to skipRounds parts; the part after those, or after one that
// could decide nothing, waits for the rows. Every delivery is decided once,
// in chain order part by part.
func TestHeldRowsAreSkippedPartAfterPartThenWaitedFor(t *testing.T) {
	ctx := context.Background()
	srcs := func(units ...string) engine.HeldRows {
		var h engine.HeldRows
		for _, u := range units {
			s := engine.SourceState{Route: "incidents", Source: []string{"fd", u}}
			h.Sources = append(h.Sources, s.ID())
		}
		return h
	}
	var batch []engine.Message
	for i := 1; i <= 6; i++ {
		batch = append(batch, unitUpdate(fmt.Sprintf("u%d", i), 1, fmt.Sprint(i), i))
	}
	for _, tc := range []struct {
		name      string
		holds     []engine.HeldRows // at each Update that skips, in turn
		wantSkips []bool
		order     []int // the deliveries in chain order
	}{
		{"fewer rows held each part", []engine.HeldRows{
			srcs("u2", "u3", "u4", "u5", "u6"), srcs("u3", "u4", "u5", "u6"), srcs("u4", "u5", "u6"), srcs("u5", "u6"), srcs("u6")},
			[]bool{true, true, true, true, false}, []int{0, 1, 2, 3, 4, 5}},
		{"a part that decides nothing", []engine.HeldRows{
			srcs("u2", "u3", "u4", "u5", "u6"), srcs("u2", "u3", "u4", "u5", "u6")},
			[]bool{true, true, false}, []int{0, 1, 2, 3, 4, 5}},
		{"the rows free after the first part", []engine.HeldRows{srcs("u1", "u3", "u5")},
			[]bool{true, true}, []int{1, 3, 5, 0, 2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, m, got := processHolding(t, tc.holds, batch, tc.wantSkips)
			for pos, i := range tc.order {
				if got[i].Outcome != engine.Applied || got[i].Position != uint64(pos+1) {
					t.Errorf("delivery %d: %s at position %d, want applied at %d", i, got[i].Outcome, got[i].Position, pos+1)
				}
			}
			res, err := audit.VerifyChains(ctx, m, nil)
			if err != nil || len(res) != 1 || res[0].Records != uint64(len(batch)) {
				t.Fatalf("chains %+v, %v: want one intact chain of %d records", res, err, len(batch))
			}
			if st, _ := e.ReadState(ctx); len(entityValues(st)) != 2*len(batch) {
				t.Fatalf("state %v: want each delivery's incident and unit", entityValues(st))
			}
		})
	}
}

// entityValues flattens a state to "entity.field" → value.
func entityValues(st []engine.EntityState) map[string]string {
	out := map[string]string{}
	for _, e := range st {
		for _, v := range e.Fields {
			out[e.Name+"."+v.Name] = v.Num + v.Str
		}
	}
	return out
}

// TestASplitBatchWhoseSecondPartFailedIsNotDecidedTwice: when the part of
// a batch left for the rows another member held fails, the first part is
// committed; passed again, the same messages keep the first part's
// decisions and only the rest is decided, once.
func TestASplitBatchWhoseSecondPartFailedIsNotDecidedTwice(t *testing.T) {
	ctx := context.Background()
	m, _ := memory.NewGroup(0, 0).Open("m1")
	held := engine.SourceState{Route: "incidents", Source: []string{"fd", "e1"}}
	st := &holding{sharedBackend: m, holds: []engine.HeldRows{{Sources: []string{held.ID()}}}, failAt: 2}
	counts := recordCounts{}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}, Observer: counts})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batch := []engine.Message{unitUpdate("e1", 1, "7", 1), unitUpdate("e2", 1, "8", 2), unitUpdate("e3", 1, "9", 3)}
	if _, err := e.Process(ctx, batch); !errors.Is(err, errWrite) {
		t.Fatalf("Process = %v, want the second part's failure", err)
	}
	got, err := e.Process(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{3, 1, 2} // e2 and e3 committed first, e1 after
	for i, d := range got {
		if d.Outcome != engine.Applied || d.Position != want[i] {
			t.Errorf("delivery %d: %s at position %d, want applied at %d", i, d.Outcome, d.Position, want[i])
		}
	}
	if counts["applied"] != 3 || len(counts) != 1 {
		t.Errorf("decisions observed %v, want 3 applied and nothing else", counts)
	}
	res, err := audit.VerifyChains(ctx, m, nil)
	if err != nil || len(res) != 1 || res[0].Records != 3 {
		t.Fatalf("chains %+v, %v: want one intact chain of 3 records", res, err)
	}
	if st, _ := e.ReadState(ctx); fmt.Sprint(entityValues(st)) != "map[incident/7.casualties:1 incident/8.casualties:2 incident/9.casualties:3 unit/e1.status:s1 unit/e2.status:s1 unit/e3.status:s1]" {
		t.Fatalf("state %v", entityValues(st))
	}
}

// recordCounts counts the committed audit records by outcome.
type recordCounts map[string]int

func (c recordCounts) Committed(records []engine.AuditRecord, _ []engine.EntityState) {
	for _, r := range records {
		c[r.Outcome]++
	}
}

// A part of a batch that waited for a row another member held is decided
// after that member's commit, and its record is timed so: a group's audit
// log merged by time then shows each entity's changes in the order they
// were made (explain --at, lineages), never a later value before an
// earlier one. It was timed when its batch began, before the other
// member's commit.
func TestAPartThatWaitedForAnotherMembersRowIsTimedAfterItsCommit(t *testing.T) {
	ctx := context.Background()
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(1_900_000_000, tick.Add(int64(time.Millisecond))) }
	g := memory.NewGroup(0, 0)
	open := func(st engine.Store) *engine.Engine {
		e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{incidentRoute}, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	m2, err := g.Open("m2")
	if err != nil {
		t.Fatal(err)
	}
	e2 := open(m2)
	m1, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	st := &holding{sharedBackend: m1, holds: []engine.HeldRows{{Entities: []string{"incident/7"}}}, meanwhile: func() {
		if _, err := e2.Process(ctx, []engine.Message{unitUpdate("e9", 1, "7", 1)}); err != nil {
			t.Error(err)
		}
	}}
	e1 := open(st)
	if _, err := e1.Process(ctx, []engine.Message{unitUpdate("e1", 1, "7", 1), unitUpdate("e2", 1, "8", 2)}); err != nil {
		t.Fatal(err)
	}
	type change struct {
		at    time.Time
		after string
	}
	var changes []change
	for _, member := range []string{"m1", "m2"} {
		if err := m1.ScanChain(ctx, member, 1, func(r engine.AuditRecord) error {
			for _, c := range r.Effects {
				if c.Entity == "incident/7" {
					changes = append(changes, change{r.Time, string(c.After)})
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortStableFunc(changes, func(a, b change) int { return a.at.Compare(b.at) })
	if len(changes) != 2 || changes[0].after != "1" || changes[1].after != "2" {
		t.Fatalf("incident/7's changes by time: %+v, want 1 then 2", changes)
	}
}
