package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of engines on two members of one group racing on the same
// keys, source windows, entities and quarantine entries, as a group does.

var sharedRoutes = []engine.Route{
	{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "unit"}, Sequence: "seq", Epoch: "boot",
		Effects: []engine.EffectSpec{{Entity: "incident/{incident}", Add: map[string]string{"casualties": "delta"}}}},
	{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}},
}

func newEngine(t *testing.T, s *handle, now func() time.Time) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), s.Store, engine.Options{Routes: sharedRoutes, TTL: time.Minute, Now: now})
	if err != nil {
		t.Fatalf("engine on member %s: %v", s.Member(), err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func meter(id int, kwh string) engine.Message {
	return engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":%s}`, id, kwh)}
}

func incident(seq int, delta int) engine.Message {
	return engine.Message{Topic: "incidents/fd", Payload: fmt.Appendf(nil, `{"agency":"fd","unit":"e1","boot":1,"seq":%d,"incident":"7","delta":%d}`, seq, delta)}
}

func meterAt(meterID string, id int, kwh string) engine.Message {
	return engine.Message{Topic: "plant/" + meterID + "/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":%s}`, id, kwh)}
}

func mustProcess(t *testing.T, e *engine.Engine, msgs ...engine.Message) []engine.Decision {
	t.Helper()
	ds, err := e.Process(context.Background(), msgs)
	if err != nil {
		t.Error(err)
	}
	return ds
}

func groupField(t *testing.T, e *engine.Engine, entity, field string) string {
	t.Helper()
	st, err := e.ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == entity {
			return s.Fields.Get(field).Num
		}
	}
	return ""
}

// together runs fns at the same moment and waits for all of them.
func together(fns ...func()) {
	var start, done sync.WaitGroup
	start.Add(1)
	for _, fn := range fns {
		done.Go(func() { start.Wait(); fn() })
	}
	start.Done()
	done.Wait()
}

func testSharedSameReplay(t *testing.T, p *place) {
	a := newEngine(t, p.handle(t, "m1"), nil)
	b := newEngine(t, p.handle(t, "m2"), nil)
	const rounds = 1000
	for i := range rounds {
		var da, db []engine.Decision
		var ea, eb error
		together(
			func() { da, ea = a.Process(context.Background(), []engine.Message{meter(i, "0.25")}) },
			func() { db, eb = b.Process(context.Background(), []engine.Message{meter(i, "0.25")}) })
		if ea != nil || eb != nil {
			t.Fatalf("round %d: %v, %v", i, ea, eb)
		}
		got := map[engine.Outcome]int{da[0].Outcome: 1}
		got[db[0].Outcome]++
		if got[engine.Applied] != 1 || got[engine.Duplicate] != 1 {
			t.Fatalf("round %d: outcomes %v and %v, want one applied and one duplicate", i, da[0].Outcome, db[0].Outcome)
		}
	}
	if kwh, _ := strconv.ParseFloat(groupField(t, a, "meter/m1", "kwh"), 64); kwh != 250 {
		t.Fatalf("meter/m1 kwh = %v after %d rounds of 0.25, want 250", kwh, rounds)
	}
}

func testSharedSourceRace(t *testing.T, p *place) {
	a := newEngine(t, p.handle(t, "m1"), nil)
	b := newEngine(t, p.handle(t, "m2"), nil)
	mustProcess(t, a, incident(0, 1)) // the source's first sequence
	// Blocks of 16 sequences: each member gets its half of a block (every
	// other sequence) and the other member's half of the block before, again:
	// the replays a broker deals to the other member.
	const blocks = 25
	applied := map[int]int{0: 1}
	var mu sync.Mutex
	run := func(e *engine.Engine, parity int) {
		for blk := range blocks {
			var msgs []engine.Message
			var seqs []int
			for s := 1 + 16*blk; s < 1+16*(blk+1); s++ {
				if s%2 == parity {
					msgs, seqs = append(msgs, incident(s, 1)), append(seqs, s)
				}
				if blk > 0 && (s-16)%2 != parity {
					msgs, seqs = append(msgs, incident(s-16, 1)), append(seqs, s-16)
				}
			}
			ds, err := e.Process(context.Background(), msgs)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for i, d := range ds {
				if d.Outcome.Effective() {
					applied[seqs[i]]++
				} else if d.Outcome != engine.Duplicate {
					t.Errorf("sequence %d: %v (%s)", seqs[i], d.Outcome, d.Reason)
				}
			}
			mu.Unlock()
		}
	}
	together(func() { run(a, 0) }, func() { run(b, 1) })
	const n = 1 + 16*blocks
	for s := range n {
		if applied[s] != 1 {
			t.Fatalf("sequence %d applied %d times", s, applied[s])
		}
	}
	if got := groupField(t, a, "incident/7", "casualties"); got != strconv.Itoa(n) {
		t.Fatalf("incident/7 casualties = %s, want %d", got, n)
	}
	reports, err := b.ReadSources(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].High != n-1 || len(reports[0].Gaps) != 0 {
		t.Fatalf("sources = %+v, want one source at %d with no gap", reports, n-1)
	}
}

func testSharedEntityRace(t *testing.T, p *place) {
	a := newEngine(t, p.handle(t, "m1"), nil)
	b := newEngine(t, p.handle(t, "m2"), nil)
	for i := range 50 {
		together(
			func() { mustProcess(t, a, meterAt(fmt.Sprintf("new-%d", i), 2*i, "1")) },
			func() { mustProcess(t, b, meterAt(fmt.Sprintf("new-%d", i), 2*i+1, "2")) })
		if got := groupField(t, a, "meter/new-"+strconv.Itoa(i), "kwh"); got != "3" {
			t.Fatalf("meter/new-%d kwh = %q after two members each added to it first, want 3", i, got)
		}
	}
}

func testSharedConcurrentRelease(t *testing.T, p *place) {
	a := newEngine(t, p.handle(t, "m1"), nil)
	b := newEngine(t, p.handle(t, "m2"), nil)
	for round := range 20 {
		// A conflict: the same key with other content is held.
		mustProcess(t, a, meter(1000+round, "1"))
		ds := mustProcess(t, b, meter(1000+round, "5"))
		if len(ds) != 1 || ds[0].Outcome != engine.Conflict {
			t.Fatalf("round %d: %+v, want a conflict", round, ds)
		}
		var held []engine.QuarantineEntry
		ro := p.handle(t, "")
		if err := ro.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error { held = append(held, q); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(held) != 1 {
			t.Fatalf("round %d: %d held entries, want 1", round, len(held))
		}
		qid := held[0].ID
		releaseTogether(t, round, a, b, qid, engine.Duplicate) // a conflict: its key was applied
	}
	if got, _ := strconv.ParseFloat(groupField(t, a, "meter/m1", "kwh"), 64); got != 20 {
		t.Fatalf("meter/m1 kwh = %v, want 20: only the first reading of each key applies", got)
	}
}

func testSharedConcurrentReleaseApplies(t *testing.T, p *place) {
	a := newEngine(t, p.handle(t, "m1"), nil)
	hb := p.handle(t, "m2")
	b := newEngine(t, hb, nil)
	mustProcess(t, a, incident(100000, 0))
	for round := range 20 {
		ds := mustProcess(t, b, incident(1+round, 1))
		if len(ds) != 1 || ds[0].Outcome != engine.Quarantined {
			t.Fatalf("round %d: %+v, want quarantined below the window", round, ds)
		}
		qid := hb.QuarantineBase() + ds[0].Position
		releaseTogether(t, round, a, b, qid, engine.Applied)
	}
	if got := groupField(t, a, "incident/7", "casualties"); got != "20" {
		t.Fatalf("incident/7 casualties = %v, want 20", got)
	}
}

// releaseTogether releases entry qid from a and b at once: one release
// must decide it want, the other find it gone.
func releaseTogether(t *testing.T, round int, a, b *engine.Engine, qid uint64, want engine.Outcome) {
	t.Helper()
	var ra, rb error
	var da, db engine.Decision
	together(
		func() { da, ra = a.Release(context.Background(), qid, "duty officer") },
		func() { db, rb = b.Release(context.Background(), qid, "shift lead") })
	ok := 0
	for _, r := range []struct {
		d   engine.Decision
		err error
	}{{da, ra}, {db, rb}} {
		switch {
		case r.err == nil:
			ok++
			if r.d.Outcome != want {
				t.Fatalf("round %d: released decided %v, want %v", round, r.d.Outcome, want)
			}
		case !errors.Is(r.err, engine.ErrNotFound):
			t.Fatalf("round %d: release: %v", round, r.err)
		}
	}
	if ok != 1 {
		t.Fatalf("round %d: %d releases of one entry succeeded, want 1 (errors %v, %v)", round, ok, ra, rb)
	}
}
