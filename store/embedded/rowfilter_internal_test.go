package embedded

import (
	"encoding/binary"
	"fmt"
	"os"
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
	var released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) }) // before the store's Close
	s.filterBuilt = func() { close(scanned); <-release }
	s.buildFilter(1, 64)
	<-scanned
	tx, err := s.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() }) // after a commit, ErrTxClosed
	released.Do(func() { close(release) })
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if s.filters.current()[1] != old {
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

// A filter whose build fails, a page of its tree damaged, is not left as
// the one being built: were it, no larger filter would be built for that
// tree again, and the one in use would fill until it held every key.
func TestAFilterWhoseBuildFailsIsNotLeftBeingBuilt(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.update(func(tx *bolt.Tx) error {
		put := s.rowPutter(tx)
		for i := range 3000 {
			if err := put(kindEntity, fmt.Appendf(nil, "e%05d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	path, leaf, size := s.path, lastLeaf(t, s, bucketEntities), int64(s.db.Info().PageSize)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(binary.NativeEndian.AppendUint64(nil, leaf+1), int64(leaf)*size) // it names another page
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	s = openTestIn(t, dir)
	rt, err := s.ReadRows(t.Context()) // the first read of the rows builds the filters
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	s.filtering.Wait()
	if s.filters.building[1].Load() != nil {
		t.Fatal("the entities' filter whose scan met a damaged page is still the one being built")
	}
}

// lastLeaf returns the page id of the last leaf under the root of bucket
// name, a branch page.
func lastLeaf(t *testing.T, s *Store, name []byte) uint64 {
	t.Helper()
	f, err := os.Open(s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var leaf uint64
	err = s.view(func(tx *bolt.Tx) error {
		size := int64(tx.DB().Info().PageSize)
		w := pageWalk{f: f, size: size, pages: tx.Size() / size, seen: map[uint64]bool{}}
		root, ok := w.read(uint64(tx.Bucket(name).Root()))
		if !ok || len(root.children) < 2 {
			return fmt.Errorf("the root of %s is not a branch page of leaves (%v, %d children)", name, ok, len(root.children))
		}
		leaf = root.children[len(root.children)-1]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}
