package embedded_test

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// TestABatchsRowsGoIntoTheirTreeOnlyWhenTheyShareItsPages: a commit puts
// into their tree the rows that lie side by side in it (a fleet reporting
// in the order of its names, a few meters reporting again and again), and
// logs rows that would each rewrite a page of their own: a batch whose
// rows lie a few stored rows apart, as a million meters drawn at random
// do once the tree holds a few batches' rows, and a batch of a few rows.
func TestABatchsRowsGoIntoTheirTreeOnlyWhenTheyShareItsPages(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(names func(i int) string, n int, want int, what string) {
		t.Helper()
		var b engine.Batch
		for i := range n {
			b.Entities = append(b.Entities, testEntity(names(i), 1))
		}
		if err := s.Commit(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		if got := embedded.LoggedRows(s); got != want {
			t.Fatalf("%s: the row log holds %d rows; want %d", what, got, want)
		}
	}
	name := func(i int) string { return fmt.Sprintf("meter/m%05d", i) }
	commit(name, 8000, 0, "8,000 new rows in the order of their names")
	commit(func(i int) string { return name(8 * i) }, 1000, 1000, "1,000 stored rows 8 apart")
	commit(func(i int) string { return name(2001 + 8*(i/7) + i%7) }, 700, 1000, "700 stored rows side by side, none logged")
	commit(func(i int) string { return name(9000 + i) }, 20, 1020, "20 new rows side by side, too few to tell")
}
