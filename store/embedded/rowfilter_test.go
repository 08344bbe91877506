package embedded_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// filterBatch is commit n's batch of rows never written before: a source
// and two entities, some of them beside the last commit's (put into their
// trees), most not (logged, then merged).
func filterBatch(n int) engine.Batch {
	var b engine.Batch
	for i := range 5 {
		b.Sources = append(b.Sources, testSource(fmt.Sprintf("s%05d-%d", n, i), n))
		b.Entities = append(b.Entities, testEntity(fmt.Sprintf("e%05d-%d", n, i), n), testEntity(fmt.Sprintf("f%d-%05d", i, n), n))
	}
	return b
}

// TestTheRowFiltersNeverHideAStoredRow: the filters that spare a look-up
// of a row no tree holds never say a stored row is absent, while they are
// built larger again and again as the rows grow (filters sized for a few
// keys), while reads run beside the commits, and after a reopen, while
// they are built from the trees in the background. And they are used: a
// row never written is not looked for.
func TestTheRowFiltersNeverHideAStoredRow(t *testing.T) {
	defer embedded.SetMinFilterKeys(8)()
	dir := t.TempDir()
	open := func() *embedded.Store {
		t.Helper()
		s, err := embedded.Open(dir, embedded.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		embedded.SetRowLogMerge(s, 90, 1<<20, 20)
		return s
	}
	s := open()
	commitWhileReading(t, s, 1, 300)
	checkNeverWritten(t, s, "before the reopen")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open() // its filters are built from the trees, while reads run
	defer s.Close()
	if err := readCommitted(t, s, 300); err != nil {
		t.Fatalf("just after the reopen: %v", err)
	}
	commitWhileReading(t, s, 301, 400)
	embedded.WaitFilters(s)
	if err := readCommitted(t, s, 400); err != nil {
		t.Fatalf("once the filters are built: %v", err)
	}
	checkNeverWritten(t, s, "after the reopen")
}

// commitWhileReading commits filterBatch from to to while a reader reads,
// again and again, every row of the commits done so far.
func commitWhileReading(t *testing.T, s *embedded.Store, from, to int) {
	t.Helper()
	var committed atomic.Int64 // the commits whose rows every read must find
	committed.Store(int64(from - 1))
	var stop atomic.Bool
	missed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if err := readCommitted(t, s, int(committed.Load())); err != nil {
				missed <- err
				return
			}
		}
	})
	for n := from; n <= to; n++ {
		b := filterBatch(n)
		if err := s.Commit(t.Context(), &b); err != nil {
			t.Fatalf("commit %d: %v", n, err)
		}
		committed.Store(int64(n))
	}
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-missed:
		t.Fatal(err)
	default:
	}
}

// readCommitted reads, in one read of the rows, every row of the first n
// commits of filterBatch; an error names the first it does not find.
func readCommitted(t *testing.T, s *embedded.Store, n int) error {
	rt, err := s.ReadRows(t.Context())
	if err != nil {
		return err
	}
	defer rt.Close()
	for c := 1; c <= n; c++ {
		b := filterBatch(c)
		for _, x := range b.Sources {
			if _, ok, err := rt.Source(x.ID()); !ok || err != nil {
				return fmt.Errorf("source %q of commit %d (of %d committed) not found (%v)", x.ID(), c, n, err)
			}
		}
		for _, e := range b.Entities {
			if _, ok, err := rt.Entity(e.Name); !ok || err != nil {
				return fmt.Errorf("entity %q of commit %d (of %d committed) not found (%v)", e.Name, c, n, err)
			}
		}
	}
	return nil
}

// checkNeverWritten checks that both filters are built and say that most
// rows never written are not in their trees.
func checkNeverWritten(t *testing.T, s *embedded.Store, when string) {
	t.Helper()
	embedded.WaitFilters(s)
	for _, tree := range []string{"sources", "entities"} {
		said := 0
		for i := range 1000 {
			may, built := embedded.FilterMayHold(s, tree, fmt.Sprintf("never-%d", i))
			if !built {
				t.Fatalf("%s: no filter of the %s is built", when, tree)
			}
			if may {
				said++
			}
		}
		if said > 50 {
			t.Fatalf("%s: the %s' filter says %d of 1000 rows never written may be there", when, tree, said)
		}
	}
}
