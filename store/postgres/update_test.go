package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/postgres"
)

// records returns n sealed records of member's chain from position from
// (the chain's links are not those of earlier records: stores do not verify).
func records(member string, from uint64, n int) []engine.AuditRecord {
	out := make([]engine.AuditRecord, n)
	var prev engine.Hash
	for i := range out {
		out[i] = engine.AuditRecord{Position: from + uint64(i), Time: time.Unix(1_700_000_000, 0).UTC(), Route: "meters",
			Topic: "plant/m1/energy", Source: []string{"m1"}, Outcome: "applied", Member: member}
		if err := engine.Seal(&out[i], prev); err != nil {
			panic(err)
		}
		prev = out[i].Hash
	}
	return out
}

func key(n int) engine.Hash { return sha256.Sum256(fmt.Appendf(nil, "key-%d", n)) }

func keyEntry(n int, t time.Time) engine.KeyEntry {
	return engine.KeyEntry{Ordinal: uint64(n), Key: key(n), Digest: key(-n), Time: t.UnixNano()}
}

func source(seq int64) engine.SourceState {
	return engine.SourceState{Route: "incidents", Source: []string{"fd", "e1"},
		Epochs: []engine.EpochWindow{{Epoch: "1", Numeric: true, Value: 1, High: seq, First: 0, Bitmap: []uint64{1}}}}
}

func sourceID() string { s := source(0); return s.ID() }

func testLostKeyRace(t *testing.T, g *group) {
	a, b := g.mustOpen("m1"), g.mustOpen("m2")
	r := &engine.Reads{Keys: []engine.Hash{key(1)}, KeyCutoff: time.Now().Add(-time.Minute).UnixNano()}
	calls := 0
	err := a.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
		calls++
		if calls == 1 {
			// m2 applies the same key while m1 decides.
			if err := b.Update(t.Context(), r, func(*engine.Rows) (*engine.Batch, error) {
				return &engine.Batch{Keys: []engine.KeyEntry{keyEntry(1, time.Now())}, Audit: records("m2", 1, 1)}, nil
			}); err != nil {
				t.Errorf("m2: %v", err)
			}
			return &engine.Batch{Keys: []engine.KeyEntry{keyEntry(1, time.Now())}, Audit: records("m1", 1, 1),
				Entities: []engine.EntityState{{Name: "meter/x", Fields: engine.Fields{}}}}, nil
		}
		if len(rows.Keys) != 1 || rows.Keys[0].Key != key(1) {
			t.Errorf("second decide read keys %+v, want m2's", rows.Keys)
		}
		return &engine.Batch{Audit: records("m1", 1, 1)}, nil // a duplicate now
	})
	if err != nil || calls != 2 {
		t.Fatalf("Update = %v after %d decides, want nil after 2", err, calls)
	}
	if st := a.SharedStats(); st.Retries != 1 || st.Updates != 1 || st.Rows != 1 {
		t.Fatalf("stats %+v", st)
	}
	if snap, err := a.Load(t.Context()); err != nil || len(snap.Entities) != 0 {
		t.Fatalf("the lost attempt's entity was written: %+v, %v", snap, err)
	}
}

// testCreatingSourceWaited: a member whose batch names a source that
// another member's Update is creating (it claimed the absent row) waits for
// that Update and decides once, on the row it wrote: it neither races nor
// decides again.
func testCreatingSourceWaited(t *testing.T, g *group) {
	a, b := g.mustOpen("m1"), g.mustOpen("m2")
	r := &engine.Reads{Sources: []string{sourceID()}}
	var wg sync.WaitGroup
	var bSaw []int64
	err := a.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
		if len(rows.Sources) != 0 {
			t.Errorf("m1 read %+v, want no source", rows.Sources)
		}
		wg.Go(func() {
			if err := b.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
				high := int64(-1)
				if len(rows.Sources) == 1 {
					high = rows.Sources[0].Epochs[0].High
				}
				bSaw = append(bSaw, high)
				return &engine.Batch{Sources: []engine.SourceState{source(high + 1)}}, nil
			}); err != nil {
				t.Errorf("m2: %v", err)
			}
		})
		waitForLockWait(t, g)
		return &engine.Batch{Sources: []engine.SourceState{source(3)}}, nil
	})
	wg.Wait()
	if err != nil || fmt.Sprint(bSaw) != "[3]" {
		t.Fatalf("Update = %v, m2's decides saw %v, want [3]: m1's row, once", err, bSaw)
	}
	snap, err := b.Load(t.Context())
	if err != nil || len(snap.Sources) != 1 || snap.Sources[0].Epochs[0].High != 4 {
		t.Fatalf("source after both: %+v, %v", snap, err)
	}
	if st := b.SharedStats(); st.Retries != 0 || st.LockWaits != 1 || st.Updates != 1 {
		t.Fatalf("m2 stats %+v, want one wait and no retry", st)
	}
}

// waitForLockWait waits until one session of the server waits for a lock.
func waitForLockWait(t *testing.T, g *group) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if count(t, g.url, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session ever waited for a lock")
		}
	}
}

// testUnwrittenClaimsDropped: the rows an Update claimed (absent when read)
// and did not write are gone when it commits, and no row with an empty
// state is ever left.
func testUnwrittenClaimsDropped(t *testing.T, g *group) {
	a := g.mustOpen("m1")
	r := &engine.Reads{Sources: []string{sourceID()}, Entities: []string{"meter/a", "meter/b"}}
	err := a.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
		return &engine.Batch{Entities: []engine.EntityState{{Name: "meter/b", Fields: engine.Fields{}}},
			Audit: records("m1", 1, 1)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := a.Load(t.Context())
	if err != nil || len(snap.Sources) != 0 || len(snap.Entities) != 1 || snap.Entities[0].Name != "meter/b" {
		t.Fatalf("after the update: %+v, %v; want meter/b alone", snap, err)
	}
	for _, table := range []string{"sources", "entities"} {
		if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.`+table+` WHERE state = ''::bytea`); n != 0 {
			t.Fatalf("%d claims left in %s", n, table)
		}
	}
}

// testCreatingRowsNoRaces: members whose batches create overlapping sets
// of rows, in every order, wait for each other: no batch loses a race or
// deadlocks (either would be a retry), and every add is counted once.
func testCreatingRowsNoRaces(t *testing.T, g *group) {
	const members, batches, names = 3, 30, 40
	stores := make([]*postgres.Store, members)
	for i := range stores {
		stores[i] = g.mustOpen(fmt.Sprintf("m%d", i+1))
	}
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for n := range batches {
				var r engine.Reads
				for _, k := range rng.Perm(names)[:names/2] {
					r.Entities = append(r.Entities, fmt.Sprintf("meter/%03d", k+n)) // new ones each batch
				}
				slices.Sort(r.Entities)
				err := s.Update(t.Context(), &r, func(rows *engine.Rows) (*engine.Batch, error) {
					return &engine.Batch{Entities: added(r.Entities, rows.Entities), Audit: records(fmt.Sprintf("m%d", i+1), uint64(n+1), 1)}, nil
				})
				if err != nil {
					t.Errorf("m%d batch %d: %v", i+1, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	snap, err := stores[0].Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range snap.Entities {
		n, _ := strconv.Atoi(e.Fields.Get("n").Num)
		total += n
	}
	if want := members * batches * names / 2; total != want {
		t.Errorf("%d adds counted, want %d", total, want)
	}
	for i, s := range stores {
		if st := s.SharedStats(); st.Retries != 0 || st.Failures != 0 {
			t.Errorf("m%d stats %+v, want no retry", i+1, st)
		}
	}
}

// added is each of names with its field n one more than in rows.
func added(names []string, rows []engine.EntityState) []engine.EntityState {
	have := map[string]engine.EntityState{}
	for _, e := range rows {
		have[e.Name] = e
	}
	out := make([]engine.EntityState, len(names))
	for i, name := range names {
		n, _ := strconv.Atoi(have[name].Fields.Get("n").Num)
		out[i] = engine.EntityState{Name: name, Fields: engine.Fields{{Name: "n", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: strconv.Itoa(n + 1)}}}}
	}
	return out
}

func testContention(t *testing.T, g *group) {
	a, b := g.mustOpen("m1"), g.mustOpen("m2")
	calls := 0
	err := a.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
		calls++
		k := keyEntry(calls, time.Now())
		if err := b.Commit(t.Context(), &engine.Batch{Keys: []engine.KeyEntry{k}}); err != nil {
			t.Errorf("m2: %v", err)
		}
		return &engine.Batch{Keys: []engine.KeyEntry{k}, Audit: records("m1", 1, 1)}, nil
	})
	if !errors.Is(err, engine.ErrContention) || calls != 10 {
		t.Fatalf("Update = %v after %d decides, want ErrContention after 10", err, calls)
	}
	if h, err := a.Head(t.Context()); err != nil || h.Position != 0 {
		t.Fatalf("head %+v, %v: a failed Update wrote", h, err)
	}
	if st := a.SharedStats(); st.Retries != 9 || st.Failures != 1 || st.LastError == "" {
		t.Fatalf("stats %+v", st)
	}
}

func testLockWait(t *testing.T, g *group) {
	a, b := g.mustOpen("m1"), g.mustOpen("m2")
	if err := a.Commit(t.Context(), &engine.Batch{Sources: []engine.SourceState{source(1)}}); err != nil {
		t.Fatal(err)
	}
	r := &engine.Reads{Sources: []string{sourceID()}}
	bump := func(rows *engine.Rows) *engine.Batch {
		return &engine.Batch{Sources: []engine.SourceState{source(rows.Sources[0].Epochs[0].High + 1)}}
	}
	var wg sync.WaitGroup
	var bSaw int64
	err := a.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
		wg.Go(func() {
			if err := b.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
				bSaw = rows.Sources[0].Epochs[0].High
				return bump(rows), nil
			}); err != nil {
				t.Errorf("m2: %v", err)
			}
		})
		// m2 finds the row m1 holds locked, and waits for it.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if b.SharedStats().LockWaits == 1 && count(t, g.url, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("m2 never waited for the row lock")
			}
		}
		return bump(rows), nil
	})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if bSaw != 2 {
		t.Fatalf("m2 decided on high %d, want 2: m1's write", bSaw)
	}
	if st := b.SharedStats(); st.LockWaits != 1 || st.Updates != 1 {
		t.Fatalf("m2 stats %+v, want one lock wait", st)
	}
}

func testPrune(t *testing.T, g *group) {
	o := g.options("m1")
	o.TTL, o.MaxEntries = time.Hour, 2500
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	old, now := time.Now().Add(-2*time.Hour), time.Now()
	var keys []engine.KeyEntry
	for i := 1; i <= 4000; i++ {
		at := now
		if i <= 1200 {
			at = old
		}
		keys = append(keys, keyEntry(i, at))
	}
	if err := s.Commit(t.Context(), &engine.Batch{Keys: keys}); err != nil {
		t.Fatal(err)
	}
	// While another member prunes (holds the lock), Prune leaves it to it.
	c, err := pgx.Connect(t.Context(), g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(t.Context(), `SELECT pg_advisory_lock(hashtext('replayguard prune ' || $1))`, g.schema); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(t.Context()); err != nil || n != 0 {
		t.Fatalf("Prune while another member prunes = %d, %v, want 0", n, err)
	}
	if _, err := c.Exec(t.Context(), `SELECT pg_advisory_unlock(hashtext('replayguard prune ' || $1))`, g.schema); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(t.Context())
	if err != nil || n != 1500 {
		t.Fatalf("Prune = %d, %v, want 1500 (1200 by age, 300 by count)", n, err)
	}
	if got := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.keys`); got != 2500 {
		t.Fatalf("%d keys left, want 2500", got)
	}
	if got := count(t, g.url, `SELECT min(ordinal) FROM `+g.schema+`.keys`); got != 1501 {
		t.Fatalf("oldest key left has ordinal %d, want 1501", got)
	}
	ro, err := postgres.Open(t.Context(), g.options(""))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Prune(t.Context()); !errors.Is(err, postgres.ErrReadOnly) {
		t.Fatalf("Prune on a read-only handle = %v", err)
	}
}

// A new group's tables are analyzed by the pruning task once the keys
// table holds AnalyzeAfter keys, not before.
func testAnalyzeNew(t *testing.T, g *group) {
	s := g.mustOpen("m1")
	c, err := pgx.Connect(t.Context(), g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, table := range []string{"keys", "sources", "entities"} { // only Prune analyzes
		if _, err := c.Exec(t.Context(), `ALTER TABLE `+g.schema+`.`+table+` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err)
		}
	}
	analyzed := func() int64 { return analyzedTables(t, g) }
	commit := func(from, to int) {
		var keys []engine.KeyEntry
		for i := from; i <= to; i++ {
			keys = append(keys, keyEntry(i, time.Now()))
		}
		if err := s.Commit(t.Context(), &engine.Batch{Keys: keys}); err != nil {
			t.Fatal(err)
		}
	}
	commit(1, postgres.AnalyzeAfter-1)
	if _, err := s.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := analyzed(); n != 0 {
		t.Fatalf("%d tables analyzed at %d keys, want none", n, postgres.AnalyzeAfter-1)
	}
	commit(postgres.AnalyzeAfter, postgres.AnalyzeAfter)
	if _, err := s.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := analyzed(); n != 3 {
		t.Fatalf("%d of the 3 tables analyzed at %d keys, want all", n, postgres.AnalyzeAfter)
	}
}

func testCancelled(t *testing.T, g *group) {
	s := g.mustOpen("m1")
	ctx, cancel := context.WithCancel(t.Context())
	err := s.Update(ctx, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
		cancel()
		return &engine.Batch{Audit: records("m1", 1, 1)}, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with its context cancelled = %v", err)
	}
	if h, err := s.Head(t.Context()); err != nil || h.Position != 0 {
		t.Fatalf("head %+v, %v", h, err)
	}
	if err := s.Commit(t.Context(), &engine.Batch{Audit: records("m1", 1, 1)}); err != nil {
		t.Fatalf("Commit after a cancelled Update: %v", err)
	}
}

// counted is an entity whose field n is the number n.
func counted(name string, n int) engine.EntityState {
	return engine.EntityState{Name: name, Fields: engine.Fields{{Name: "n", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: strconv.Itoa(n)}}}}
}

// loaded is what s loads.
func loaded(t *testing.T, s *postgres.Store) *engine.Snapshot {
	t.Helper()
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// fieldOf is the numeric field of each entity of snap, by entity name.
func fieldOf(snap *engine.Snapshot, field string) map[string]string {
	out := map[string]string{}
	for _, e := range snap.Entities {
		out[e.Name] = e.Fields.Get(field).Num
	}
	return out
}

// updateWithin runs an Update of s reading r and writing batch, from
// inside another member's Update (which holds its rows meanwhile), and
// returns the rows it read; it fails the test if the Update fails or
// waits 10 s for the other member.
func updateWithin(t *testing.T, s *postgres.Store, r *engine.Reads, batch *engine.Batch) engine.Rows {
	t.Helper()
	var read engine.Rows
	done := make(chan error, 1)
	go func() {
		done <- s.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
			read = *rows
			return batch, nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: %v", s.Member(), err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for the rows the other member holds or is creating", s.Member())
	}
	return read
}

// testSkipHeld: an Update asked with Reads.SkipHeld does not wait for the
// rows another Update holds: it names them held, reads and locks the
// others, claims the absent ones, and writes what it decided.
func testSkipHeld(t *testing.T, g *group) {
	a, b := g.mustOpen("m1"), g.mustOpen("m2")
	if err := a.Commit(t.Context(), &engine.Batch{Sources: []engine.SourceState{source(1)},
		Entities: []engine.EntityState{counted("meter/a", 1), counted("meter/c", 1)}}); err != nil {
		t.Fatal(err)
	}
	var bRows engine.Rows
	err := a.Update(t.Context(), &engine.Reads{Sources: []string{sourceID()}, Entities: []string{"meter/a"}},
		func(rows *engine.Rows) (*engine.Batch, error) {
			bRows = updateWithin(t, b, &engine.Reads{Sources: []string{sourceID()}, Entities: []string{"meter/a", "meter/b", "meter/c"}, SkipHeld: true},
				&engine.Batch{Entities: []engine.EntityState{counted("meter/b", 2), counted("meter/c", 2)}})
			return &engine.Batch{Sources: []engine.SourceState{source(2)}, Entities: []engine.EntityState{counted("meter/a", 3)}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bRows.Held.Sources) != fmt.Sprint([]string{sourceID()}) || fmt.Sprint(bRows.Held.Entities) != "[meter/a]" ||
		len(bRows.Sources) != 0 || len(bRows.Entities) != 1 || bRows.Entities[0].Name != "meter/c" {
		t.Fatalf("m2 read %+v: want the source and meter/a held, meter/c read, meter/b absent", bRows)
	}
	snap := loaded(t, b)
	got := fieldOf(snap, "n")
	if fmt.Sprint(got) != "map[meter/a:3 meter/b:2 meter/c:2]" || len(snap.Sources) != 1 || snap.Sources[0].Epochs[0].High != 2 {
		t.Fatalf("after both: entities %v, sources %+v", got, snap.Sources)
	}
	if st := b.SharedStats(); st.HeldRows != 2 || st.LockWaits != 0 || st.Retries != 0 || st.Updates != 1 {
		t.Fatalf("m2 stats %+v, want 2 held rows, no wait, no retry", st)
	}
}

// testSkipHeldClaimed: an Update asked with Reads.SkipHeld does not wait
// for a row another Update is creating (its claim, not yet committed): it
// names it held, as it does a locked row.
func testSkipHeldClaimed(t *testing.T, g *group) {
	a, b := g.mustOpen("m1"), g.mustOpen("m2")
	if err := a.Commit(t.Context(), &engine.Batch{Entities: []engine.EntityState{counted("meter/c", 1)}}); err != nil {
		t.Fatal(err)
	}
	var bRows engine.Rows
	err := a.Update(t.Context(), &engine.Reads{Entities: []string{"meter/new"}}, func(rows *engine.Rows) (*engine.Batch, error) {
		bRows = updateWithin(t, b, &engine.Reads{Entities: []string{"meter/c", "meter/new"}, SkipHeld: true},
			&engine.Batch{Entities: []engine.EntityState{counted("meter/c", 2)}})
		return &engine.Batch{Entities: []engine.EntityState{counted("meter/new", 1)}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bRows.Held.Entities) != "[meter/new]" || len(bRows.Entities) != 1 || bRows.Entities[0].Name != "meter/c" {
		t.Fatalf("m2 read %+v: want meter/new held, meter/c read", bRows)
	}
	snap := loaded(t, b)
	got := fieldOf(snap, "n")
	if fmt.Sprint(got) != "map[meter/c:2 meter/new:1]" {
		t.Fatalf("after both: entities %v", got)
	}
}

// testSkipHeldWritten holds a source row that another transaction wrote
// and has not committed, as a member's batch does between its write and its
// commit: an update that may skip held rows names it, and does not wait.
func testSkipHeldWritten(t *testing.T, g *group) {
	b := g.mustOpen("m2")
	if err := b.Commit(t.Context(), &engine.Batch{Sources: []engine.SourceState{source(1)}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(t.Context()))
	if _, err := tx.Exec(t.Context(), `UPDATE `+g.schema+`.sources SET state = state WHERE id = $1`, []byte(sourceID())); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var held []string
	go func() {
		r := &engine.Reads{Sources: []string{sourceID()}, SkipHeld: true}
		done <- b.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
			held = rows.Held.Sources
			return &engine.Batch{}, nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || fmt.Sprint(held) != fmt.Sprint([]string{sourceID()}) {
			t.Fatalf("Update = %v, held %q: want the written row held", err, held)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the update waited for the transaction that wrote the row")
	}
}

// analyzedTables counts the group's keys, sources and entities tables
// that were ever analyzed.
func analyzedTables(t *testing.T, g *group) int64 {
	return count(t, g.url, `SELECT count(*) FROM pg_stat_user_tables WHERE coalesce(last_analyze, last_autoanalyze) IS NOT NULL AND relid IN ('`+
		g.schema+`.keys'::regclass, '`+g.schema+`.sources'::regclass, '`+g.schema+`.entities'::regclass)`)
}

// testAnalyzeFailsPruneGoesOn holds a lock ANALYZE waits for while a
// member whose lock_timeout is short prunes: its analyze fails, and the
// keys past MaxEntries are pruned all the same; the next prune analyzes.
func testAnalyzeFailsPruneGoesOn(t *testing.T, g *group) {
	o := g.options("m1")
	o.MaxEntries = postgres.AnalyzeAfter
	u, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c lock_timeout=200")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads a + as itself
	o.URL = u.String()
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	var keys []engine.KeyEntry
	for i := 1; i <= postgres.AnalyzeAfter+100; i++ {
		keys = append(keys, keyEntry(i, time.Now()))
	}
	if err := s.Commit(t.Context(), &engine.Batch{Keys: keys}); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(t.Context(), g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, table := range []string{"keys", "sources", "entities"} { // only Prune analyzes
		if _, err := c.Exec(t.Context(), `ALTER TABLE `+g.schema+`.`+table+` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE `+g.schema+`.keys IN SHARE UPDATE EXCLUSIVE MODE`); err != nil { // as ANALYZE takes
		t.Fatal(err)
	}
	n, err := s.Prune(t.Context())
	if err != nil || n != 100 {
		t.Fatalf("prune with the analyze failing: %d keys, %v; want 100 pruned", n, err)
	}
	if n := analyzedTables(t, g); n != 0 {
		t.Fatalf("%d tables analyzed under the lock", n)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := analyzedTables(t, g); n != 3 {
		t.Fatalf("%d of the 3 tables analyzed once the lock went", n)
	}
}

// testSkipHeldCountedOnce: an Update that skips a held row and is decided
// again (another member inserted one of its keys first) counts the row
// once: SharedStats.HeldRows counts the rows a written batch left to a
// batch after it, not every read of them.
func testSkipHeldCountedOnce(t *testing.T, g *group) {
	a, b, c := g.mustOpen("m1"), g.mustOpen("m2"), g.mustOpen("m3")
	if err := a.Commit(t.Context(), &engine.Batch{Sources: []engine.SourceState{source(1)}}); err != nil {
		t.Fatal(err)
	}
	r := &engine.Reads{Keys: []engine.Hash{key(1)}, Sources: []string{sourceID()}, Entities: []string{"meter/c"},
		KeyCutoff: time.Now().Add(-time.Minute).UnixNano(), SkipHeld: true}
	decides := 0
	err := a.Update(t.Context(), &engine.Reads{Sources: []string{sourceID()}}, func(*engine.Rows) (*engine.Batch, error) {
		done := make(chan error, 1)
		go func() {
			done <- b.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
				if decides++; decides == 1 { // m3 applies the key while m2 decides
					if err := c.Commit(t.Context(), &engine.Batch{Keys: []engine.KeyEntry{keyEntry(1, time.Now())}}); err != nil {
						t.Errorf("m3: %v", err)
					}
					return &engine.Batch{Keys: []engine.KeyEntry{keyEntry(1, time.Now())}, Audit: records("m2", 1, 1)}, nil
				}
				return &engine.Batch{Entities: []engine.EntityState{counted("meter/c", 1)}, Audit: records("m2", 1, 1)}, nil
			})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("m2: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("m2 waited for the row m1 holds")
		}
		return &engine.Batch{Sources: []engine.SourceState{source(2)}}, nil
	})
	if err != nil || decides != 2 {
		t.Fatalf("Update = %v, m2 decided %d times, want twice", err, decides)
	}
	if st := b.SharedStats(); st.Updates != 1 || st.Retries != 1 || st.HeldRows != 1 {
		t.Fatalf("m2 stats: %d updates, %d retries, %d held rows; want 1 update, 1 retry, 1 held row (the source, left out of the one batch written)",
			st.Updates, st.Retries, st.HeldRows)
	}
}
