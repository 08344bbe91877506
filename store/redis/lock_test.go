package redis

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// testLocksHammered has two members decide batches on the same meters at
// once: they take turns under the row locks instead of losing races, and
// every message adds to its meter once.
func testLocksHammered(t *testing.T, g *group) {
	const batches, size, meters = 30, 20, 5
	stores := []*Store{g.must(t, "a"), g.must(t, "b")}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		e := newEngine(t, s)
		wg.Go(func() {
			for n := range batches {
				msgs := make([]engine.Message, size)
				for j := range msgs {
					msgs[j] = meterMsg(j%meters, fmt.Sprintf("%s-%d-%d", s.Member(), n, j))
				}
				d, err := e.Process(t.Context(), msgs)
				if err != nil {
					errs[i] = err
					return
				}
				for _, d := range d {
					if d.Outcome != engine.Applied {
						errs[i] = fmt.Errorf("member %s decided %v", s.Member(), d.Outcome)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var waits uint64
	for _, s := range stores {
		st := s.SharedStats()
		if st.Retries != 0 || st.Updates != batches {
			t.Fatalf("member %s: stats %+v, want %d updates and no retries", s.Member(), st, batches)
		}
		waits += st.LockWaits
		if n := len(chainOf(t, s, s.Member())); n != batches*size {
			t.Fatalf("member %s has %d records, want %d", s.Member(), n, batches*size)
		}
	}
	if waits == 0 {
		t.Fatal("no member waited for a row lock: the batches never met")
	}
	snap, err := stores[0].Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Entities) != meters {
		t.Fatalf("%d entities, want %d", len(snap.Entities), meters)
	}
	want := 1.5 * float64(len(stores)*batches*size/meters)
	for _, e := range snap.Entities {
		if got, err := strconv.ParseFloat(e.Fields.Get("kwh").Num, 64); err != nil || got != want {
			t.Fatalf("%s kwh = %q, want %v", e.Name, e.Fields.Get("kwh").Num, want)
		}
	}
	if n := g.do(t, "EXISTS", stores[0].k.entityLock("meter/m1")); n != int64(0) {
		t.Fatal("a row lock outlived the updates")
	}
}

// testLockAbandoned leaves a row lock as an Update of a member that died
// would: the next Update waits for it to expire, no longer, and writes.
func testLockAbandoned(t *testing.T, g *group) {
	a := g.must(t, "a", func(o *Options) { o.LeaseTTL = 900 * time.Millisecond })
	ttl := a.lockTTL()
	g.do(t, "SET", a.k.entityLock("meter/m1"), "a dead update", "PX", strconv.FormatInt(ttl.Milliseconds(), 10))
	start := time.Now()
	_, err := update(t.Context(), a, &engine.Reads{Entities: []string{"meter/m0", "meter/m1"}}, func(*engine.Rows) (*engine.Batch, error) {
		return batchAfter(t, a, 1), nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// It waited for the lock, and wrote once it expired: had it waited
	// on to its deadline (lockWaitTTLs lock TTLs) it would have failed with
	// ErrContention. How soon after the expiry it wrote is the machine's
	// scheduling, not the store's: a loaded test machine adds hundreds of ms.
	if took < ttl/2 {
		t.Fatalf("update took %v with a lock of %v left: it did not wait for the lock", took, ttl)
	}
	if st := a.SharedStats(); st.LockWaits == 0 || st.Retries != 0 || st.Updates != 1 {
		t.Fatalf("stats %+v, want lock waits, no retries, an update", st)
	}
	if n := g.do(t, "EXISTS", a.k.entityLock("meter/m0"), a.k.entityLock("meter/m1")); n != int64(0) {
		t.Fatal("the update left its row locks")
	}
}

// testLockHeldTooLong keeps a row lock past the wait's deadline: Update
// fails with ErrContention and writes nothing.
func testLockHeldTooLong(t *testing.T, g *group) {
	a := g.must(t, "a", func(o *Options) { o.LeaseTTL = 300 * time.Millisecond })
	g.do(t, "SET", a.k.sourceLock("src"), "another update", "PX", "60000")
	calls, err := update(t.Context(), a, &engine.Reads{Sources: []string{"src"}, Entities: []string{"e"}}, func(*engine.Rows) (*engine.Batch, error) {
		return batchAfter(t, a, 1), nil
	})
	wantErr(t, err, engine.ErrContention)
	if calls != 0 {
		t.Fatalf("decide called %d times on rows it could not lock", calls)
	}
	if h, _ := a.Head(t.Context()); h.Position != 0 {
		t.Fatal("something was written")
	}
	if n := g.do(t, "EXISTS", a.k.entityLock("e")); n != int64(0) {
		t.Fatal("the update kept a lock while waiting for another")
	}
}

// testLockReleased has decide fail and write an empty batch: neither
// leaves a row lock behind.
func testLockReleased(t *testing.T, g *group) {
	a := g.must(t, "a")
	r := &engine.Reads{Sources: []string{"src"}, Entities: []string{"e"}}
	boom := errors.New("boom")
	if _, err := update(t.Context(), a, r, func(*engine.Rows) (*engine.Batch, error) { return nil, boom }); err != boom {
		t.Fatalf("update: %v, want decide's error", err)
	}
	if n := g.do(t, "EXISTS", a.k.sourceLock("src"), a.k.entityLock("e")); n != int64(0) {
		t.Fatal("a failed update left its row locks")
	}
	if _, err := update(t.Context(), a, r, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil }); err != nil {
		t.Fatal(err)
	}
	if n := g.do(t, "EXISTS", a.k.sourceLock("src"), a.k.entityLock("e")); n != int64(0) {
		t.Fatal("an update that wrote nothing left its row locks")
	}
}
