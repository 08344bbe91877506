package redis

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"{replayguard}:", true},
		{"prod:{plant-7}:", true},
		{"replayguard:", false},
		{"{}:", false},
		{"{a}{b}:", false},
		{"}a{:", false},
		{"{a:", false},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			err := checkPrefix(tc.prefix)
			if (err == nil) != tc.ok {
				t.Fatalf("checkPrefix(%q) = %v, want ok=%v", tc.prefix, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "store.prefix") {
				t.Fatalf("error %q does not name store.prefix", err)
			}
		})
	}
}

// TestStore runs the tests that share one durable server, each on a group
// of its own.
func TestStore(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, g *group)
	}{
		{"an engine on two members sees each other's keys", testEngineMembers},
		{"a key another member wrote first makes update decide again", testKeyRace},
		{"a row another member changed makes update decide again", testRowRace},
		{"a row another member's update changed while the locks were lost makes update decide again", testRowRaceUnlocked},
		{"a race lost on every attempt fails with ErrContention", testContention},
		{"an error from decide is returned as it is and nothing is written", testDecideError},
		{"an expired key may be replaced", testExpiredKey},
		{"a batch that overwrites a live key is refused", testLiveKey},
		{"a resolved entry no longer open writes nothing", testResolvedGone},
		{"quarantine is group-wide, in id order, bytes exact", testQuarantine},
		{"an index member an entry resolved by a build from before left behind is passed over", testHeldIndexStale},
		{"a member raising version 8 indexes the entries held before the index", testHeldBackfilled},
		{"an entry held before the index is found once a member raised version 8", testHeldBackfilledFound},
		{"a member raising version 8 passes over an entry it cannot read", testHeldBackfillPassesOverAnUnreadableEntry},
		{"commit must follow the chain head", testAuditGap},
		{"load returns the group's rows and this member's head", testLoad},
		{"a read-only handle reads every chain and writes nothing", testReadOnly},
		{"a second open of a member is refused while the first lives", testLeaseHeld},
		{"a dead holder on this host is taken over", testLeaseDeadHolder},
		{"the chain of a member killed on this host is claimed by another at once", testChainOfAMemberKilledHereIsClaimedAtOnce},
		{"a stolen lease fences update", testFenced},
		{"an expired lease is taken back by the next write", testLeaseExpired},
		{"a batch decided past its lease, which another process took meanwhile, writes nothing", testLeaseLostDuringABatch},
		{"the lease is renewed while the handle is open", testLeaseRenewed},
		{"concurrent opens create the schema once", testSchemaConcurrent},
		{"a newer schema is refused", testSchemaNewer},
		{"a member raises an older schema, never a newer one set meanwhile", testSchemaRaisedUpward},
		{"rows written as JSON under version 1 are read, and written back binary", testSchemaJSONRows},
		{"a version an earlier build's running member holds is not raised, naming that member", testSchemaNotRaisedUnderARunningMember},
		{"keys leave by ttl", testPruneTTL},
		{"keys beyond max entries leave oldest first", testPruneMaxEntries},
		{"two members on the same rows take turns under row locks", testLocksHammered},
		{"an abandoned row lock delays an update until it expires", testLockAbandoned},
		{"a row lock held past the deadline fails with ErrContention", testLockHeldTooLong},
		{"a failed or empty update releases its row locks", testLockReleased},
		{"every method returns ErrClosed after close", testClosed},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newGroup(srv)) })
	}
}

func testEngineMembers(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	ea, eb := newEngine(t, a), newEngine(t, b)
	msgs := []engine.Message{meterMsg(1, "x1"), meterMsg(2, "x2"), meterMsg(1, "x1")}
	da, err := ea.Process(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if got := []engine.Outcome{da[0].Outcome, da[1].Outcome, da[2].Outcome}; !slices.Equal(got, []engine.Outcome{engine.Applied, engine.Applied, engine.Duplicate}) {
		t.Fatalf("member a decided %v", got)
	}
	db, err := eb.Process(t.Context(), []engine.Message{meterMsg(2, "x2"), meterMsg(3, "x3")})
	if err != nil {
		t.Fatal(err)
	}
	if db[0].Outcome != engine.Duplicate || db[1].Outcome != engine.Applied {
		t.Fatalf("member b decided %v, %v: a's key must be a duplicate", db[0].Outcome, db[1].Outcome)
	}
	st, err := eb.ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var kwh []string
	for _, e := range st {
		kwh = append(kwh, e.Name+"="+e.Fields.Get("kwh").Num)
	}
	if want := []string{"meter/m1=1.5", "meter/m2=1.5", "meter/m3=1.5"}; !slices.Equal(kwh, want) {
		t.Fatalf("state %v, want %v", kwh, want)
	}
	ra, rb := chainOf(t, a, "a"), chainOf(t, b, "b")
	if len(ra) != 3 || len(rb) != 2 || ra[2].Member != "a" || rb[0].Member != "b" {
		t.Fatalf("chains: a has %d records, b %d", len(ra), len(rb))
	}
	for _, recs := range [][]engine.AuditRecord{ra, rb} {
		prev := engine.Hash{}
		for _, r := range recs {
			h, _ := engine.ChainHash(r)
			if r.Prev != prev || h != r.Hash {
				t.Fatalf("record %d of %q does not verify", r.Position, r.Member)
			}
			prev = r.Hash
		}
	}
	chains, err := a.Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(chains) != 2 || chains[0].Member != "a" || chains[0].Head.Position != 3 || chains[1].Head.Hash != rb[1].Hash {
		t.Fatalf("chains %+v", chains)
	}
	if a.QuarantineBase() == b.QuarantineBase() || a.QuarantineBase()&(1<<40-1) != 0 {
		t.Fatalf("quarantine bases %x and %x", a.QuarantineBase(), b.QuarantineBase())
	}
}

// testKeyRace has b write a key between a's read and a's write: a's
// script finds it, and a decides again on b's key.
func testKeyRace(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	k := hashOf("contested")
	r := &engine.Reads{Keys: []engine.Hash{k}, KeyCutoff: time.Now().Add(-time.Hour).UnixNano()}
	var seen [][]engine.KeyEntry
	calls, err := update(t.Context(), a, r, func(rows *engine.Rows) (*engine.Batch, error) {
		seen = append(seen, rows.Keys)
		batch := batchAfter(t, a, 1)
		if len(rows.Keys) > 0 {
			batch.Keys = nil // a duplicate now
			return batch, nil
		}
		batch.Keys[0].Key = k
		if len(seen) == 1 {
			other := batchAfter(t, b, 1)
			other.Keys[0].Key, other.Keys[0].Digest = k, hashOf("b's")
			if err := b.Commit(t.Context(), other); err != nil {
				t.Fatal(err)
			}
		}
		return batch, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(seen[1]) != 1 || seen[1][0].Digest != hashOf("b's") {
		t.Fatalf("decide called %d times, second saw %v; want 2 calls, the second seeing b's key", calls, seen[len(seen)-1])
	}
	if st := a.SharedStats(); st.Retries != 1 || st.Updates != 1 || st.Rows != 1 {
		t.Fatalf("stats %+v, want 1 retry, 1 update, 1 row", st)
	}
	v, err := g.srv.Do("GET", a.k.key(k))
	if bs := hashOf("b's"); err != nil || v.(string)[:32] != string(bs[:]) {
		t.Fatalf("stored key %q, %v: b's write must stand", v, err)
	}
}

func testRowRace(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	ent := func(v string) engine.EntityState {
		return engine.EntityState{Name: "meter/m1", Fields: engine.Fields{{Name: "kwh", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: v}}}}
	}
	r := &engine.Reads{Entities: []string{"meter/m1"}}
	var seen []string
	calls, err := update(t.Context(), a, r, func(rows *engine.Rows) (*engine.Batch, error) {
		was := "0"
		if len(rows.Entities) == 1 {
			was = rows.Entities[0].Fields.Get("kwh").Num
		}
		seen = append(seen, was)
		if len(seen) == 1 { // b adds 5 in between
			if err := b.Commit(t.Context(), &engine.Batch{Entities: []engine.EntityState{ent("5")}, Audit: records(t, "b", engine.AuditHead{}, 1)}); err != nil {
				t.Fatal(err)
			}
		}
		batch := batchAfter(t, a, 1)
		batch.Entities = []engine.EntityState{ent(was + "+1")}
		return batch, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || !slices.Equal(seen, []string{"0", "5"}) {
		t.Fatalf("decide saw %v in %d calls, want [0 5] in 2", seen, calls)
	}
	snap, err := a.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Entities) != 1 || snap.Entities[0].Fields.Get("kwh").Num != "5+1" {
		t.Fatalf("entities %+v", snap.Entities)
	}
}

func testContention(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	r := &engine.Reads{Sources: []string{"src"}}
	src := engine.SourceState{Route: "meters", Source: []string{"src"}}
	r.Sources = []string{src.ID()}
	head := engine.AuditHead{}
	calls, err := update(t.Context(), a, r, func(rows *engine.Rows) (*engine.Batch, error) {
		recs := records(t, "b", head, 1)
		head = engine.AuditHead{Position: recs[0].Position, Hash: recs[0].Hash}
		if err := b.Commit(t.Context(), &engine.Batch{Sources: []engine.SourceState{src}, Audit: recs}); err != nil {
			t.Fatal(err)
		}
		batch := batchAfter(t, a, 1)
		batch.Sources = []engine.SourceState{src}
		return batch, nil
	})
	wantErr(t, err, engine.ErrContention)
	if calls != maxAttempts {
		t.Fatalf("decide called %d times, want %d", calls, maxAttempts)
	}
	if h, _ := a.Head(t.Context()); h.Position != 0 {
		t.Fatalf("a's head moved to %d", h.Position)
	}
	if st := a.SharedStats(); st.Failures != 1 || st.Retries != maxAttempts-1 || st.LastError == "" {
		t.Fatalf("stats %+v", st)
	}
}

func testDecideError(t *testing.T, g *group) {
	a := g.must(t, "a")
	boom := errors.New("boom")
	_, err := update(t.Context(), a, &engine.Reads{Keys: []engine.Hash{hashOf("k")}}, func(*engine.Rows) (*engine.Batch, error) {
		return nil, boom
	})
	if err != boom {
		t.Fatalf("error %v, want decide's own", err)
	}
	if h, _ := a.Head(t.Context()); h.Position != 0 {
		t.Fatal("something was written")
	}
}

func testExpiredKey(t *testing.T, g *group) {
	a := g.must(t, "a")
	k := hashOf("old")
	old := batchAfter(t, a, 1)
	old.Keys[0].Key, old.Keys[0].Time = k, time.Now().Add(-2*time.Hour).UnixNano()
	if err := a.Commit(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	r := &engine.Reads{Keys: []engine.Hash{k}, KeyCutoff: time.Now().Add(-time.Hour).UnixNano()}
	calls, err := update(t.Context(), a, r, func(rows *engine.Rows) (*engine.Batch, error) {
		if len(rows.Keys) != 1 || rows.Keys[0].Time >= r.KeyCutoff {
			t.Errorf("rows %+v: want the expired key", rows.Keys)
		}
		b := batchAfter(t, a, 1)
		b.Keys[0].Key = k
		return b, nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("update: %v after %d calls", err, calls)
	}
	v, _ := g.srv.Do("GET", a.k.key(k))
	e, err := decodeKeyValue(k, v.(string))
	if err != nil || e.Time < r.KeyCutoff {
		t.Fatalf("stored %+v, %v: the new entry must replace the expired one", e, err)
	}
}

func testLiveKey(t *testing.T, g *group) {
	a := g.must(t, "a")
	first := batchAfter(t, a, 1)
	if err := a.Commit(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	r := &engine.Reads{Keys: []engine.Hash{first.Keys[0].Key}, KeyCutoff: time.Now().Add(-time.Hour).UnixNano()}
	_, err := update(t.Context(), a, r, func(*engine.Rows) (*engine.Batch, error) {
		b := batchAfter(t, a, 1)
		b.Keys[0].Key = first.Keys[0].Key
		return b, nil
	})
	if err == nil || !strings.Contains(err.Error(), "live") {
		t.Fatalf("update: %v; want a refusal to overwrite a live key", err)
	}
	if h, _ := a.Head(t.Context()); h.Position != 1 {
		t.Fatalf("head at %d: something was written", h.Position)
	}
}

func testResolvedGone(t *testing.T, g *group) {
	a := g.must(t, "a")
	_, err := update(t.Context(), a, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
		b := batchAfter(t, a, 1)
		b.Resolved = []uint64{a.QuarantineBase() + 99}
		return b, nil
	})
	wantErr(t, err, engine.ErrNotFound)
	if h, _ := a.Head(t.Context()); h.Position != 0 {
		t.Fatal("something was written")
	}
	if n := g.do(t, "EXISTS", a.k.keyIndex); n != int64(0) {
		t.Fatal("keys were written")
	}
}

func testQuarantine(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	payload := []byte{0, 0xff, '\n', '"', 0x80, 'x'}
	commitQ := func(s *Store, n int) []uint64 {
		bt := batchAfter(t, s, n)
		var ids []uint64
		for _, r := range bt.Audit {
			id := s.QuarantineBase() + r.Position
			ids = append(ids, id)
			bt.Quarantine = append(bt.Quarantine, engine.QuarantineEntry{ID: id, Time: r.Time, Outcome: "malformed", Topic: r.Topic,
				Payload: append(slices.Clone(payload), byte(id))})
		}
		if err := s.Commit(t.Context(), bt); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	idsB, idsA := commitQ(b, 2), commitQ(a, 3)
	var got []uint64
	err := a.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		if !bytes.Equal(q.Payload, append(slices.Clone(payload), byte(q.ID))) {
			t.Errorf("entry %d payload %q", q.ID, q.Payload)
		}
		got = append(got, q.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(idsA), idsB...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("scan %v, want %v", got, want)
	}
	// b resolves one of a's entries.
	bt := batchAfter(t, b, 1)
	bt.Resolved = []uint64{idsA[1]}
	if err := b.Commit(t.Context(), bt); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Quarantined(t.Context(), idsA[1]); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("resolved entry: %v", err)
	}
	q, err := a.Quarantined(t.Context(), idsA[2])
	if err != nil || q.ID != idsA[2] || q.Outcome != "malformed" {
		t.Fatalf("entry %+v, %v", q, err)
	}
}

func testAuditGap(t *testing.T, g *group) {
	a := g.must(t, "a")
	if err := a.Commit(t.Context(), batchAfter(t, a, 2)); err != nil {
		t.Fatal(err)
	}
	b := batchAfter(t, a, 2)
	b.Audit = b.Audit[1:]
	wantErr(t, a.Commit(t.Context(), b), engine.ErrAuditGap)
	b = batchAfter(t, a, 3)
	b.Audit = slices.Delete(b.Audit, 1, 2)
	wantErr(t, a.Commit(t.Context(), b), engine.ErrAuditGap)
	if h, _ := a.Head(t.Context()); h.Position != 2 {
		t.Fatalf("head at %d, want 2", h.Position)
	}
}

func testLoad(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	src := engine.SourceState{Route: "r", Source: []string{"s", "1"}, Epochs: []engine.EpochWindow{{Epoch: "1", High: 7, Bitmap: []uint64{0xff}}}}
	bt := batchAfter(t, b, 2)
	bt.Sources = []engine.SourceState{src}
	bt.Entities = []engine.EntityState{{Name: "e/1", Fields: engine.Fields{{Name: "f", FieldValue: engine.FieldValue{Kind: engine.KindString, Str: "x", Version: engine.Version{Epoch: 1, Sequence: 2}}}}}}
	if err := b.Commit(t.Context(), bt); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(t.Context(), batchAfter(t, a, 1)); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Keys) != 0 || snap.AuditHead.Position != 1 || len(snap.Sources) != 1 || len(snap.Entities) != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
	if snap.Sources[0].ID() != src.ID() || snap.Sources[0].Epochs[0].Bitmap[0] != 0xff || snap.Entities[0].Fields.Get("f") != bt.Entities[0].Fields.Get("f") {
		t.Fatalf("rows %+v %+v", snap.Sources, snap.Entities)
	}
}

func testReadOnly(t *testing.T, g *group) {
	a := g.must(t, "a")
	if err := a.Commit(t.Context(), batchAfter(t, a, 3)); err != nil {
		t.Fatal(err)
	}
	r := g.must(t, "")
	if r.Member() != "" || r.QuarantineBase() != 0 {
		t.Fatal("a read-only handle has a member")
	}
	if err := r.Commit(t.Context(), &engine.Batch{Audit: records(t, "", engine.AuditHead{}, 1)}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("commit on a read-only handle: %v", err)
	}
	if err := r.Update(t.Context(), &engine.Reads{}, nil); err == nil {
		t.Fatal("update on a read-only handle succeeded")
	}
	if err := r.ScanAudit(t.Context(), 1, func(engine.AuditRecord) error { return nil }); err == nil || !strings.Contains(err.Error(), "ScanChain") {
		t.Fatalf("scan audit on a read-only handle: %v", err)
	}
	recs := chainOf(t, r, "a")
	if len(recs) != 3 || recs[2].Member != "a" {
		t.Fatalf("chain of a: %d records", len(recs))
	}
	var from2 []uint64
	_ = r.ScanChain(t.Context(), "a", 2, func(rec engine.AuditRecord) error { from2 = append(from2, rec.Position); return nil })
	if !slices.Equal(from2, []uint64{2, 3}) {
		t.Fatalf("scan from 2: %v", from2)
	}
	if recs := chainOf(t, r, "nobody"); len(recs) != 0 {
		t.Fatal("an unknown member has records")
	}
}

func testClosed(t *testing.T, g *group) {
	a := g.must(t, "a")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	nop := func(engine.AuditRecord) error { return nil }
	for name, err := range map[string]error{
		"close":      a.Close(),
		"load":       func() error { _, err := a.Load(ctx); return err }(),
		"head":       func() error { _, err := a.Head(ctx); return err }(),
		"commit":     a.Commit(ctx, &engine.Batch{}),
		"update":     a.Update(ctx, &engine.Reads{}, nil),
		"scan audit": a.ScanAudit(ctx, 1, nop),
		"scan chain": a.ScanChain(ctx, "a", 1, nop),
		"chains":     func() error { _, err := a.Chains(ctx); return err }(),
		"quarantine": a.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { return nil }),
		"entry":      func() error { _, err := a.Quarantined(ctx, 1); return err }(),
	} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after close: %v", name, err)
		}
	}
	if v, _ := g.srv.Do("EXISTS", g.prefix+"lease:a"); v != int64(0) {
		t.Fatal("close left the lease")
	}
}

// testHeldIndexStale: an entry resolved by a build from before the index
// of open entries by key and content leaves its member behind in
// quarantine:held; FindHeld passes over it, and finds the next open entry
// of the same key and content.
func testHeldIndexStale(t *testing.T, g *group) {
	ctx := t.Context()
	s := g.must(t, "m1")
	b := batchAfter(t, s, 2)
	key, content := hashOf("k"), hashOf("content")
	for i, r := range b.Audit {
		b.Quarantine = append(b.Quarantine, engine.QuarantineEntry{ID: s.QuarantineBase() + r.Position, Topic: "t",
			Key: key.String(), Content: content, Payload: []byte{byte(i)}})
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	first, second := b.Quarantine[0].ID, b.Quarantine[1].ID
	if id, found, err := s.FindHeld(ctx, key, content); err != nil || !found || id != first {
		t.Fatalf("FindHeld: #%d, %v, %v; want #%d", id, found, err, first)
	}
	g.do(t, "HDEL", g.prefix+"quarantine", quarantineID(first)) // as a build from before resolves it
	if id, found, err := s.FindHeld(ctx, key, content); err != nil || !found || id != second {
		t.Fatalf("FindHeld with #%d resolved by a build from before: #%d, %v, %v; want #%d", first, id, found, err, second)
	}
	if _, found, err := s.FindHeld(ctx, key, hashOf("other")); err != nil || found {
		t.Fatalf("FindHeld of other content: %v, %v; want none", found, err)
	}
}
