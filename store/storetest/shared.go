package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Opener opens a handle on one group store under a member id; "" opens a
// read-only handle. It registers the handle's Close as a test cleanup
// (ignoring the error: some subtests close it themselves).
type Opener func(member string) (engine.SharedStore, error)

// SharedBackend is what a shared store implements.
type SharedBackend interface {
	engine.SharedStore
	engine.AuditScanner
	engine.QuarantineScanner
	engine.ChainScanner
}

// RunShared runs the conformance suite of shared stores. group returns an
// opener on a new, empty group store for each subtest.
func RunShared(t *testing.T, group func(t *testing.T) Opener) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"a new group loads empty", testSharedEmpty},
		{"load returns the group's rows and the member's head", testSharedRoundTrip},
		{"each member writes its own chain", testSharedChains},
		{"an audit gap fails the whole batch", testSharedAuditGap},
		{"update hands decide the stored rows it names", testSharedUpdateReads},
		{"a resolved entry that is not open fails the whole batch", testSharedResolveGone},
		{"an error from decide writes nothing", testSharedDecideError},
		{"a member id held by a live handle is refused", testSharedMemberHeld},
		{"quarantine ids are unique in the group", testSharedQuarantineBase},
		{"a read-only handle reads and writes nothing", testSharedReadOnly},
		{"payload bytes round-trip exactly", testSharedPayloads},
		{"every method returns ErrClosed after close", testSharedClosed},
		{"one replay at two members at once applies once", testSharedSameReplay},
		{"two members racing on one source's window", testSharedSourceRace},
		{"two members creating one entity add both", testSharedEntityRace},
		{"two concurrent releases of one entry apply once", testSharedConcurrentRelease},
		{"an expired key lets its message apply again", testSharedExpiredKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, group(t)) })
	}
}

func openMember(t *testing.T, open Opener, member string) SharedBackend {
	t.Helper()
	s, err := open(member)
	if err != nil {
		t.Fatalf("open member %q: %v", member, err)
	}
	b, ok := s.(SharedBackend)
	if !ok {
		t.Fatalf("%T does not implement the audit, quarantine and chain scanners", s)
	}
	return b
}

func testSharedEmpty(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	snap := load(t, s)
	if len(snap.Keys)+len(snap.Sources)+len(snap.Entities) != 0 || snap.AuditHead != (engine.AuditHead{}) {
		t.Fatalf("new group loaded %+v", snap)
	}
	if h, err := s.Head(t.Context()); err != nil || h != (engine.AuditHead{}) {
		t.Fatalf("Head = %+v, %v", h, err)
	}
	if cs, err := s.Chains(t.Context()); err != nil || len(cs) != 0 {
		t.Fatalf("Chains = %+v, %v", cs, err)
	}
	if q := scanQuarantine(t, s); len(q) != 0 {
		t.Fatalf("quarantine = %+v", q)
	}
}

// memberRecords returns n sealed records of member's chain after c's head.
func memberRecords(t *testing.T, c *chain, member string, n int) []engine.AuditRecord {
	t.Helper()
	out := make([]engine.AuditRecord, n)
	for i := range out {
		out[i] = auditRecord(c.head.Position + 1)
		out[i].Member = member
		if err := engine.Seal(&out[i], c.head.Hash); err != nil {
			t.Fatal(err)
		}
		c.head = engine.AuditHead{Position: out[i].Position, Hash: out[i].Hash}
	}
	return out
}

func testSharedRoundTrip(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	var c chain
	b := &engine.Batch{
		Keys:     []engine.KeyEntry{sharedKey(1), sharedKey(2)},
		Sources:  []engine.SourceState{sourceState("incidents", []string{"fd", "e1"}, 10), sourceState("incidents", []string{"pd", "u7"}, 3)},
		Entities: []engine.EntityState{entityState("incident/7", 3), entityState("unit/e1", 9)},
		Audit:    memberRecords(t, &c, "m1", 3),
	}
	b.Quarantine = []engine.QuarantineEntry{quarantineEntry(s.QuarantineBase()+2, []byte(`{"x":1}`))}
	commit(t, s, b)
	snap := normalize(load(t, s))
	if len(snap.Keys) != 0 {
		t.Errorf("a shared store's Load returned %d keys; it leaves them to Update's reads", len(snap.Keys))
	}
	want := normalize(&engine.Snapshot{Sources: b.Sources, Entities: b.Entities, AuditHead: c.head})
	if !reflect.DeepEqual(snap.Sources, want.Sources) || !reflect.DeepEqual(snap.Entities, want.Entities) || snap.AuditHead != c.head {
		t.Fatalf("Load:\n got %+v\nwant %+v", snap, want)
	}
	if got := scanAudit(t, s, 1); !reflect.DeepEqual(got, b.Audit) {
		t.Fatalf("ScanAudit:\n got %+v\nwant %+v", got, b.Audit)
	}
	if got := scanQuarantine(t, s); !reflect.DeepEqual(got, b.Quarantine) {
		t.Fatalf("quarantine:\n got %+v\nwant %+v", got, b.Quarantine)
	}
	// The keys are there for the next batch's reads.
	var rows *engine.Rows
	update(t, s, &engine.Reads{Keys: []engine.Hash{keyHash(1), keyHash(2), keyHash(3)}}, func(r *engine.Rows) (*engine.Batch, error) {
		rows = r
		return &engine.Batch{}, nil
	})
	if got := slices.SortedFunc(slices.Values(rows.Keys), byOrdinal); !reflect.DeepEqual(got, b.Keys) {
		t.Fatalf("keys read:\n got %+v\nwant %+v", got, b.Keys)
	}
}

func testSharedChains(t *testing.T, open Opener) {
	a, b := openMember(t, open, "member-a"), openMember(t, open, "member-b")
	var ca, cb chain
	for range 3 {
		commit(t, a, &engine.Batch{Audit: memberRecords(t, &ca, "member-a", 2)})
		commit(t, b, &engine.Batch{Audit: memberRecords(t, &cb, "member-b", 3)})
	}
	chains, err := a.Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Chain{{Member: "member-a", Head: ca.head}, {Member: "member-b", Head: cb.head}}
	if !reflect.DeepEqual(chains, want) {
		t.Fatalf("Chains = %+v, want %+v", chains, want)
	}
	for _, m := range []struct {
		s    SharedBackend
		name string
		n    uint64
	}{{a, "member-a", 6}, {b, "member-b", 9}} {
		var got []engine.AuditRecord
		if err := a.ScanChain(t.Context(), m.name, 2, func(r engine.AuditRecord) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if uint64(len(got)) != m.n-1 || got[0].Position != 2 || got[len(got)-1].Position != m.n {
			t.Fatalf("ScanChain(%s, 2) read %d records", m.name, len(got))
		}
		for _, r := range got {
			if r.Member != m.name {
				t.Fatalf("chain %s holds a record of %q", m.name, r.Member)
			}
		}
		if h, err := m.s.Head(t.Context()); err != nil || h.Position != m.n {
			t.Fatalf("Head of %s = %+v, %v", m.name, h, err)
		}
	}
}

func testSharedAuditGap(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	var c chain
	commit(t, s, &engine.Batch{Audit: memberRecords(t, &c, "m1", 2)})
	before := load(t, s)
	recs := memberRecords(t, &c, "m1", 2)[1:] // skips position 3
	err := s.Commit(t.Context(), &engine.Batch{Audit: recs, Entities: []engine.EntityState{entityState("x", 1)}})
	if !errors.Is(err, engine.ErrAuditGap) {
		t.Fatalf("Commit with a gap = %v, want ErrAuditGap", err)
	}
	if after := load(t, s); !reflect.DeepEqual(normalize(after), normalize(before)) {
		t.Fatalf("a refused batch changed the store: %+v", after)
	}
}

func testSharedUpdateReads(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	src := sourceState("incidents", []string{"fd", "e1"}, 10)
	commit(t, s, &engine.Batch{Keys: []engine.KeyEntry{sharedKey(1)}, Sources: []engine.SourceState{src},
		Entities: []engine.EntityState{entityState("incident/7", 3)}})
	var c chain
	r := &engine.Reads{Keys: []engine.Hash{keyHash(1), keyHash(9)}, Sources: []string{src.ID(), engine.SourceID("incidents", []string{"none"})},
		Entities: []string{"incident/7", "incident/none"}}
	update(t, s, r, func(rows *engine.Rows) (*engine.Batch, error) {
		if len(rows.Keys) != 1 || rows.Keys[0].Key != keyHash(1) || rows.Keys[0].Digest != sharedKey(1).Digest {
			t.Errorf("keys read: %+v", rows.Keys)
		}
		if len(rows.Sources) != 1 || !reflect.DeepEqual(rows.Sources[0], src) {
			t.Errorf("sources read: %+v", rows.Sources)
		}
		if len(rows.Entities) != 1 || rows.Entities[0].Name != "incident/7" {
			t.Errorf("entities read: %+v", rows.Entities)
		}
		return &engine.Batch{Keys: []engine.KeyEntry{sharedKey(9)}, Entities: []engine.EntityState{entityState("incident/7", 4)},
			Audit: memberRecords(t, &c, "m1", 1)}, nil
	})
	snap := load(t, s)
	if len(snap.Entities) != 1 || snap.Entities[0].Fields["casualties"].Num != "4.25" || snap.AuditHead != c.head {
		t.Fatalf("after update: %+v", snap)
	}
}

func testSharedResolveGone(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	var c chain
	id := s.QuarantineBase() + 1
	commit(t, s, &engine.Batch{Audit: memberRecords(t, &c, "m1", 1), Quarantine: []engine.QuarantineEntry{quarantineEntry(id, []byte("{}"))}})
	before := readShared(t, s)
	err := s.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
		return &engine.Batch{Audit: memberRecords(t, &chain{head: c.head}, "m1", 1), Resolved: []uint64{id, id + 1},
			Entities: []engine.EntityState{entityState("x", 1)}}, nil
	})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Update resolving an entry that is not open = %v, want ErrNotFound", err)
	}
	if after := readShared(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused batch changed the store:\n got %+v\nwant %+v", after, before)
	}
}

func testSharedDecideError(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	boom := errors.New("boom")
	before := readShared(t, s)
	err := s.Update(t.Context(), &engine.Reads{Keys: []engine.Hash{keyHash(1)}}, func(*engine.Rows) (*engine.Batch, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want decide's error", err)
	}
	if after := readShared(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("the store changed: %+v", after)
	}
}

func testSharedMemberHeld(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	if _, err := open("m1"); !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("second open of a held member id = %v, want ErrMemberHeld", err)
	}
	other := openMember(t, open, "m2")
	if other.Member() != "m2" || s.Member() != "m1" {
		t.Fatalf("members %q, %q", s.Member(), other.Member())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := openMember(t, open, "m1")
	if again.QuarantineBase() != s.QuarantineBase() {
		t.Fatalf("reopened member has quarantine base %d, was %d", again.QuarantineBase(), s.QuarantineBase())
	}
}

func testSharedQuarantineBase(t *testing.T, open Opener) {
	seen := map[uint64]string{}
	for i := range 4 {
		s := openMember(t, open, "m"+strconv.Itoa(i))
		base := s.QuarantineBase()
		if base == 0 || base&(1<<40-1) != 0 {
			t.Fatalf("quarantine base %#x leaves no room for positions", base)
		}
		if m, dup := seen[base]; dup {
			t.Fatalf("members %s and %s share quarantine base %#x", m, s.Member(), base)
		}
		seen[base] = s.Member()
	}
}

func testSharedReadOnly(t *testing.T, open Opener) {
	w := openMember(t, open, "m1")
	var c chain
	commit(t, w, &engine.Batch{Entities: []engine.EntityState{entityState("incident/7", 3)}, Audit: memberRecords(t, &c, "m1", 2)})
	ro := openMember(t, open, "")
	snap := load(t, ro)
	if len(snap.Entities) != 1 || snap.AuditHead != (engine.AuditHead{}) {
		t.Fatalf("read-only Load = %+v", snap)
	}
	if cs, err := ro.Chains(t.Context()); err != nil || len(cs) != 1 || cs[0].Head != c.head {
		t.Fatalf("read-only Chains = %+v, %v", cs, err)
	}
	if err := ro.Commit(t.Context(), &engine.Batch{Entities: []engine.EntityState{entityState("x", 1)}}); err == nil {
		t.Fatal("a read-only handle committed")
	}
	if err := ro.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil }); err == nil {
		t.Fatal("a read-only handle updated")
	}
}

func testSharedPayloads(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	var c chain
	payloads := [][]byte{{}, {0}, []byte("\xff\xfe\x00binary\r\n"), []byte(`{"a":"\u0000"}`), make([]byte, 300<<10)}
	b := &engine.Batch{Audit: memberRecords(t, &c, "m1", len(payloads))}
	for i, p := range payloads {
		b.Quarantine = append(b.Quarantine, quarantineEntry(s.QuarantineBase()+uint64(i+1), p))
	}
	commit(t, s, b)
	for i, p := range payloads {
		q, err := s.Quarantined(t.Context(), s.QuarantineBase()+uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if string(q.Payload) != string(p) {
			t.Fatalf("payload %d came back as %d bytes %q…, want %d", i, len(q.Payload), q.Payload[:min(16, len(q.Payload))], len(p))
		}
	}
}

func testSharedClosed(t *testing.T, open Opener) {
	s := openMember(t, open, "m1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"Load":   func() error { _, err := s.Load(ctx); return err }(),
		"Head":   func() error { _, err := s.Head(ctx); return err }(),
		"Commit": s.Commit(ctx, &engine.Batch{}),
		"Update": s.Update(ctx, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil }),
		"Scan":   s.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { return nil }),
		"Chains": func() error { _, err := s.Chains(ctx); return err }(),
		"Close":  s.Close(),
	} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// The engine tests below run engines on member handles, as a group does.

var sharedRoutes = []engine.Route{
	{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "unit"}, Sequence: "seq", Epoch: "boot",
		Effects: []engine.EffectSpec{{Entity: "incident/{incident}", Add: map[string]string{"casualties": "delta"}}}},
	{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}},
}

func newEngine(t *testing.T, s engine.SharedStore, now func() time.Time) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), s, engine.Options{Routes: sharedRoutes, TTL: time.Minute, Now: now})
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

func testSharedSameReplay(t *testing.T, open Opener) {
	a := newEngine(t, openMember(t, open, "m1"), nil)
	b := newEngine(t, openMember(t, open, "m2"), nil)
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

func groupField(t *testing.T, e *engine.Engine, entity, field string) string {
	t.Helper()
	st, err := e.ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == entity {
			return s.Fields[field].Num
		}
	}
	return ""
}

func testSharedSourceRace(t *testing.T, open Opener) {
	a := newEngine(t, openMember(t, open, "m1"), nil)
	b := newEngine(t, openMember(t, open, "m2"), nil)
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

func testSharedEntityRace(t *testing.T, open Opener) {
	a := newEngine(t, openMember(t, open, "m1"), nil)
	b := newEngine(t, openMember(t, open, "m2"), nil)
	for i := range 50 {
		together(
			func() { mustProcess(t, a, meterAt(fmt.Sprintf("new-%d", i), 2*i, "1")) },
			func() { mustProcess(t, b, meterAt(fmt.Sprintf("new-%d", i), 2*i+1, "2")) })
		if got := groupField(t, a, "meter/new-"+strconv.Itoa(i), "kwh"); got != "3" {
			t.Fatalf("meter/new-%d kwh = %q after two members each added to it first, want 3", i, got)
		}
	}
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

func testSharedConcurrentRelease(t *testing.T, open Opener) {
	a := newEngine(t, openMember(t, open, "m1"), nil)
	b := newEngine(t, openMember(t, open, "m2"), nil)
	for round := range 20 {
		// A conflict: the same key with other content is held.
		mustProcess(t, a, meter(1000+round, "1"))
		ds := mustProcess(t, b, meter(1000+round, "5"))
		if len(ds) != 1 || ds[0].Outcome != engine.Conflict {
			t.Fatalf("round %d: %+v, want a conflict", round, ds)
		}
		var held []engine.QuarantineEntry
		ro := openMember(t, open, "")
		if err := ro.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error { held = append(held, q); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(held) != 1 {
			t.Fatalf("round %d: %d held entries, want 1", round, len(held))
		}
		qid := held[0].ID
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
				if r.d.Outcome != engine.Duplicate {
					t.Fatalf("round %d: released conflict decided %v, want duplicate (its key was applied)", round, r.d.Outcome)
				}
			case !errors.Is(r.err, engine.ErrNotFound):
				t.Fatalf("round %d: release: %v", round, r.err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d releases of one entry succeeded, want 1 (errors %v, %v)", round, ok, ra, rb)
		}
	}
	if got, _ := strconv.ParseFloat(groupField(t, a, "meter/m1", "kwh"), 64); got != 20 {
		t.Fatalf("meter/m1 kwh = %v, want 20: only the first reading of each key applies", got)
	}
}

func testSharedExpiredKey(t *testing.T, open Opener) {
	t0 := time.Now()
	a := newEngine(t, openMember(t, open, "m1"), func() time.Time { return t0 })
	later := newEngine(t, openMember(t, open, "m2"), func() time.Time { return t0.Add(2 * time.Minute) })
	if ds := mustProcess(t, a, meter(1, "1")); ds[0].Outcome != engine.Applied {
		t.Fatalf("first delivery: %v", ds[0].Outcome)
	}
	if ds := mustProcess(t, a, meter(1, "1")); ds[0].Outcome != engine.Duplicate {
		t.Fatalf("replay inside the ttl: %v", ds[0].Outcome)
	}
	if ds := mustProcess(t, later, meter(1, "1")); ds[0].Outcome != engine.Applied {
		t.Fatalf("a delivery after the key's ttl (1m) was %v: the expired key was not replaced", ds[0].Outcome)
	}
	if ds := mustProcess(t, later, meter(1, "1")); ds[0].Outcome != engine.Duplicate {
		t.Fatalf("its replay: %v", ds[0].Outcome)
	}
}

// sharedState is what a group store holds, as one member sees it.
type sharedState struct {
	Snap       *engine.Snapshot
	Chains     []engine.Chain
	Quarantine []engine.QuarantineEntry
}

func readShared(t *testing.T, s SharedBackend) sharedState {
	t.Helper()
	cs, err := s.Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return sharedState{Snap: normalize(load(t, s)), Chains: cs, Quarantine: scanQuarantine(t, s)}
}

func update(t *testing.T, s engine.SharedStore, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) {
	t.Helper()
	if err := s.Update(t.Context(), r, decide); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// sharedKey is a key entry applied now: a shared store's pruning would
// remove an older one.
func sharedKey(n uint64) engine.KeyEntry {
	return engine.KeyEntry{Ordinal: n, Key: keyHash(n), Digest: keyHash(n + 7), Time: time.Now().UnixNano()}
}

func byOrdinal(a, b engine.KeyEntry) int { return cmp.Compare(a.Ordinal, b.Ordinal) }
