package embedded

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// A row filter holds every key added to it, and says few keys never added
// may be there; adds and look-ups run at once.
func TestARowFilterHoldsEveryKeyAdded(t *testing.T) {
	const n = 200_000
	f := newRowFilter(n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			f.add([]byte("meter/m" + strconv.Itoa(i)))
		}
	})
	wg.Go(func() { // look-ups while the adds run: no race
		for i := range n {
			f.holds("meter/x" + strconv.Itoa(i))
		}
	})
	wg.Wait()
	for i := range n {
		if k := "meter/m" + strconv.Itoa(i); !f.holds(k) {
			t.Fatalf("%s was added; the filter says it is not there", k)
		}
	}
	if got := f.keys.Load(); got < n*99/100 || got > n {
		t.Fatalf("the filter counts %d keys added; want about %d", got, n)
	}
	if f.full() {
		t.Fatalf("a filter sized for %d keys is full with %d", n, f.keys.Load())
	}
	wrong := 0
	for i := range n {
		if f.holds("meter/x" + strconv.Itoa(i)) {
			wrong++
		}
	}
	if wrong > n/50 {
		t.Fatalf("the filter says %d of %d keys never added may be there; want at most 2 %%", wrong, n)
	}
	t.Logf("%d of %d keys never added said to be there (%.2f %%)", wrong, n, 100*float64(wrong)/n)
	f.add([]byte("one more"))
	for range 2 * n {
		f.keys.Add(1)
	}
	if !f.full() {
		t.Fatal("a filter holding three times the keys it was sized for is not full")
	}
}

// A read consults the filters: a row put into its tree behind their back
// (no store does so) is not looked for there, where one put by a commit
// is found.
func TestAReadLooksInATreeOnlyForRowsItsFilterMayHold(t *testing.T) {
	s := openTest(t)
	s.filtering.Wait()
	err := s.update(func(tx *bolt.Tx) error {
		if err := s.rowPutter(tx)(kindEntity, []byte("put"), []byte("not a row")); err != nil {
			return err
		}
		return tx.Bucket(bucketEntities).Put([]byte("hidden"), []byte("not a row"))
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := s.ReadRows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, ok, err := rt.Entity("hidden"); ok || err != nil {
		t.Fatalf("a row its filter does not hold was looked for in its tree: found %v, %v", ok, err)
	}
	if _, _, err := rt.Entity("put"); err == nil {
		t.Fatal("a row its filter holds was not looked for in its tree (its value, which does not decode, gave no error)")
	}
}

// A read whose filter is replaced by a larger one, and a row put, between
// its taking the filters and beginning its transaction begins again with
// the new filter: the one it took does not hold the row its snapshot does.
func TestAReadBegunAsItsFilterIsReplacedFindsEveryRow(t *testing.T) {
	s := openTest(t)
	var late engine.Batch // rows side by side, put into their tree (not logged)
	for i := range 40 {
		late.Entities = append(late.Entities, engine.EntityState{Name: fmt.Sprintf("late%02d", i),
			Fields: engine.Fields{{Name: "n", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: "1"}}}})
	}
	once := false
	s.readBegins = func() {
		if once {
			return
		}
		once = true
		s.buildFilter(1, 64)
		s.filtering.Wait()
		if err := s.Commit(t.Context(), &late); err != nil {
			t.Error(err)
		}
		if n := s.rows.current().active.len(); n != 0 {
			t.Errorf("%d rows logged: the test means them put into their tree", n)
		}
	}
	rt, err := s.ReadRows(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, ok, err := rt.Entity("late07"); !ok || err != nil {
		t.Fatalf("a row committed before the read's transaction began not found (%v): the read kept a filter replaced meanwhile", err)
	}
}

// A filter built goes into use only while no write transaction is open: a
// put takes the filter in use and then the one being built, and one that
// went into use between the two would lack the put's key.
func TestABuiltFilterGoesIntoUseOnlyBetweenWriteTransactions(t *testing.T) {
	s := openTest(t)
	s.filtering.Wait()
	old := s.filters.current()[1]
	scanned, release := make(chan struct{}), make(chan struct{})
	s.filterBuilt = func() { close(scanned); <-release }
	s.buildFilter(1, 64)
	<-scanned
	tx, err := s.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if s.filters.current()[1] != old {
			_ = tx.Rollback()
			t.Fatal("a filter went into use while a write transaction was open")
		}
	}
	if err := s.rowPutter(tx)(kindEntity, []byte("during"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s.filtering.Wait()
	if f := s.filters.current()[1]; f == old || !f.holds("during") {
		t.Fatalf("after the transaction the filter built is in use (%v) and holds its put (%v); want both", f != old, f.holds("during"))
	}
}
