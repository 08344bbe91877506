package embedded_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// rowKillChildEnv names the store directory of the child process of
// TestRowsSurviveKill.
const rowKillChildEnv = "REPLAYGUARD_ROWS_KILL_CHILD"

// rowKillBatch is the child's commit n: rowBatch(n) and the entity
// "count" at n, which tells the last commit the store holds.
func rowKillBatch(n int) engine.Batch {
	b := rowBatch(n)
	b.Entities = append(b.Entities, testEntity("count", n))
	return b
}

// TestRowsSurviveKill kills a process with kill -9 while it commits rows
// through the row log, freezing it every few commits and merging it a
// few rows a commit, and closing the store (which writes the log into its
// trees) every rowKillCloseEvery commits: after each kill the store reads
// back exactly the rows of the commits it holds, and holds every commit
// the process reported. Rounds 1 and 3 kill it in the middle of a Close,
// between two of its transactions.
func TestRowsSurviveKill(t *testing.T) {
	if dir := os.Getenv(rowKillChildEnv); dir != "" {
		rowKillChild(dir)
		return
	}
	dir := t.TempDir()
	reported := 0
	for round := range 4 {
		cmd, sc, stderr := startKillChild(t, "TestRowsSurviveKill", rowKillChildEnv, dir)
		for target := reported + 150; sc.Scan(); {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "committed" {
				reported, _ = strconv.Atoi(f[1])
			}
			if reported >= target && (round%2 == 0 || len(f) == 1 && f[0] == "drained") {
				break
			}
		}
		killAndWait(t, cmd)
		s := open(t, dir, embedded.Options{ReadOnly: true})
		held, err := lastRowKillCommit(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		if held < reported {
			t.Fatalf("round %d: the store holds commits up to %d after kill -9; the process reported %d committed (%s)", round, held, reported, stderr.String())
		}
		m := newRowModel()
		for n := 1; n <= held; n++ {
			b := rowKillBatch(n)
			m.apply(&b)
		}
		when := fmt.Sprintf("round %d, after kill -9 at commit %d", round, held)
		checkRows(t, s, m, when)
		checkScans(t, s, m, when)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		reported = held
	}
}

// lastRowKillCommit is the child's last commit that s holds.
func lastRowKillCommit(ctx context.Context, s *embedded.Store) (int, error) {
	rt, err := s.ReadRows(ctx)
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	e, ok, err := rt.Entity("count")
	if err != nil || !ok {
		return 0, err
	}
	return strconv.Atoi(e.Fields[0].Num)
}

// rowKillCloseEvery is how many commits the child makes between two
// closes of the store.
const rowKillCloseEvery = 100

// rowKillChild commits rowKillBatch after the store's last until killed,
// printing each once committed, and closes the store and opens it again
// every rowKillCloseEvery commits, printing "drained" after each of the
// Close's transactions, and waiting a little for the kill.
func rowKillChild(dir string) {
	open := func() *embedded.Store {
		s := openKillChild(dir)
		// Merges and a drain of four rows a transaction: a Close writes
		// the log in several transactions.
		embedded.SetRowLogMerge(s, 60, 1<<20, 4)
		embedded.SetDrainSliced(s, func() {
			fmt.Println("drained")
			time.Sleep(10 * time.Millisecond)
		})
		return s
	}
	s, ctx := open(), context.Background()
	last, err := lastRowKillCommit(ctx, s)
	if err != nil {
		killChildFailed(err)
	}
	for n := last + 1; ; n++ {
		b := rowKillBatch(n)
		if err := s.Commit(ctx, &b); err != nil {
			killChildFailed(err)
		}
		fmt.Printf("committed %d\n", n)
		if n%rowKillCloseEvery == 0 {
			if err := s.Close(); err != nil {
				killChildFailed(err)
			}
			s = open()
		}
	}
}
