package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/postgres"
)

// lostMeters is how many meters the batch the store loses reads.
const lostMeters = 600

// loseALargeBatch has member m1, with its journal in jd, commit a reading
// of meter 9000 and then, as one batch, the second reading of each of 600
// meters whose rows member m2 (which keeps no journal) had just created:
// the batch creates no row, and fits a small lock table. The store then
// fails over to a standby that had received neither member's last
// batches (a copy of the database taken before them): deciding m1's batch
// again from its journal creates 1,200 rows, a lock each, more than the
// server's lock table holds. It returns the standby's group.
func loseALargeBatch(t *testing.T) (standby *group, jd string) {
	t.Helper()
	ctx := t.Context()
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: smallLockTable})
	g := newGroup(t, pg.URL())
	jd = t.TempDir()
	process := func(e *engine.Engine, msgs []engine.Message) {
		t.Helper()
		ds, err := e.Process(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range ds {
			if d.Outcome != engine.Applied {
				t.Fatalf("%s: %v %q, want applied", msgs[i].Payload, d.Outcome, d.Reason)
			}
		}
	}

	s, e, j := openJournaled(t, g, jd, nil)
	process(e, []engine.Message{meterReading(9000, 1)})
	e.Close()
	s.Close()
	j.Close()
	// The standby: the database as it was then. No session is on it.
	run(t, strings.Replace(pg.URL(), "/postgres?", "/template1?", 1), "CREATE DATABASE standby TEMPLATE postgres")

	s2 := g.mustOpen("m2")
	e2, err := engine.New(ctx, s2, engine.Options{Routes: []engine.Route{sequencedMeters}})
	if err != nil {
		t.Fatal(err)
	}
	var first, second []engine.Message
	for m := range lostMeters {
		first = append(first, meterReading(m, 1))
		second = append(second, meterReading(m, 2))
	}
	process(e2, first) // in parts: it creates the meters' rows
	e2.Close()
	s2.Close()

	s, e, j = openJournaled(t, g, jd, nil)
	process(e, second)
	if st := j.Stats(); st.Entries != 2 {
		t.Fatalf("the journal holds %d entries, want 2: the second batch committed as one", st.Entries)
	}
	e.Close()
	s.Close()
	j.Close()
	return &group{t: t, url: strings.Replace(pg.URL(), "/postgres?", "/standby?", 1), schema: g.schema}, jd
}

// openJournaled opens member m1 of g with its journal in jd, through wrap
// when it is not nil.
func openJournaled(t *testing.T, g *group, jd string, wrap func(*postgres.Store) engine.Store) (*postgres.Store, *engine.Engine, *journal.Journal) {
	t.Helper()
	j, err := journal.Open(jd, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	s := g.mustOpen("m1")
	var st engine.Store = s
	if wrap != nil {
		st = wrap(s)
	}
	e, err := engine.New(t.Context(), st, engine.Options{Routes: []engine.Route{sequencedMeters}, Journal: j,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return s, e, j
}

// checkRecovered asserts that the standby holds m1's lost batch decided
// again once, whole: each of the 600 meters at its second reading, applied
// once (its first was m2's, lost with no journal to bring it back), meter
// 9000 at its first; m1's chain of its first batch, the 600 decisions
// and the recovery's record, verified; nothing held.
func checkRecovered(t *testing.T, standby *group, s *postgres.Store) {
	t.Helper()
	snap := loaded(t, s)
	if len(snap.Sources) != lostMeters+1 {
		t.Errorf("%d sources stored, want %d", len(snap.Sources), lostMeters+1)
	}
	for _, src := range snap.Sources {
		want := int64(2)
		if src.Source[0] == "m-9000" {
			want = 1
		}
		if len(src.Epochs) != 1 || src.Epochs[0].High != want {
			t.Errorf("source %v: epochs %+v, want one at sequence %d", src.Source, src.Epochs, want)
		}
	}
	kwh := fieldOf(snap, "kwh")
	if len(kwh) != lostMeters+1 {
		t.Errorf("%d entities stored, want %d", len(kwh), lostMeters+1)
	}
	for name, v := range kwh {
		if v != "0.25" {
			t.Errorf("%s: kwh %s, want 0.25", name, v)
		}
	}
	if n := count(t, standby.url, "SELECT count(*) FROM "+standby.schema+".quarantine"); n != 0 {
		t.Errorf("%d quarantine entries, want none", n)
	}
	const records = 1 + lostMeters + 1
	if n := count(t, standby.url, "SELECT count(*) FROM "+standby.schema+".audit"); n != records {
		t.Errorf("%d audit records, want %d", n, records)
	}
	if res, err := audit.VerifyChains(t.Context(), s, s); err != nil || len(res) != 1 || res[0].Records != records {
		t.Errorf("audit verify = %+v, %v; want one chain of %d records", res, err, records)
	}
}

// TestARecoveryWhoseNewRowsOutgrowTheLockTableCommitsInParts: a member
// whose store failed over to a standby that lacks the rows its lost batch
// found (another member's lost batch created them) decides that batch
// again, from its journal, in parts that fit the server's lock table,
// when it starts: it does not stay stopped until max_locks_per_transaction
// is raised.
func TestARecoveryWhoseNewRowsOutgrowTheLockTableCommitsInParts(t *testing.T) {
	standby, jd := loseALargeBatch(t)
	s, e, _ := openJournaled(t, standby, jd, nil)
	if l := e.Loss(); l != nil {
		t.Fatalf("after the failover the member is stopped: %v", l)
	}
	checkRecovered(t, standby, s)
}

// cutShort is a member's store that commits a number of batches and then
// fails every Update, with nothing written, as a store does that fails
// again, or as the member's process is killed before it commits.
type cutShort struct {
	*postgres.Store
	commits atomic.Int64 // Updates that may still commit
}

var errCutShort = errors.New("the store does not answer")

// Capabilities declares the wrapper in the store's place.
func (c *cutShort) Capabilities() engine.Capabilities {
	caps := c.Store.Capabilities()
	caps.Shared = c
	return caps
}

func (c *cutShort) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if c.commits.Load() <= 0 {
		return errCutShort
	}
	err := c.Store.Update(ctx, r, decide)
	if err == nil {
		c.commits.Add(-1)
	}
	return err
}

// TestARecoveryCutShortBetweenItsPartsDecidesTheRestOnce: a recovery
// that decides a lost batch again in parts (its new rows outgrow the
// server's lock table) and stops after the first part committed is taken
// up again, by the member running on or after it was killed: the store
// holds the first part's decisions, and the rest of the batch is decided
// once, neither left out as if the whole batch had been decided again nor
// decided a second time.
func TestARecoveryCutShortBetweenItsPartsDecidesTheRestOnce(t *testing.T) {
	for _, killed := range []bool{false, true} {
		name := "taken up again by the member running on"
		if killed {
			name = "taken up again after the member was killed"
		}
		t.Run(name, func(t *testing.T) {
			standby, jd := loseALargeBatch(t)
			var c *cutShort
			s, e, j := openJournaled(t, standby, jd, func(s *postgres.Store) engine.Store {
				c = &cutShort{Store: s}
				c.commits.Store(1)
				return c
			})
			l := e.Loss()
			if l == nil || !strings.Contains(l.Reason, errCutShort.Error()) {
				t.Fatalf("the recovery, cut short after its first part: loss %v, want one failed on %q", l, errCutShort)
			}
			n := count(t, standby.url, "SELECT count(*) FROM "+standby.schema+".audit")
			if n <= 1 || n >= 1+lostMeters {
				t.Fatalf("%d audit records after the recovery was cut short, want the first batch's and a part of the lost batch's", n)
			}
			t.Logf("cut short after %d of the lost batch's %d deliveries", n-1, lostMeters)
			if killed {
				e.Close()
				s.Close()
				j.Close()
				s, e, _ = openJournaled(t, standby, jd, nil)
				if l := e.Loss(); l != nil {
					t.Fatalf("after a restart the member is stopped: %v", l)
				}
			} else {
				c.commits.Store(1 << 30)
				if err := e.CheckStore(t.Context()); err != nil {
					t.Fatalf("CheckStore once the store answers: %v", err)
				}
			}
			checkRecovered(t, standby, s)
		})
	}
}
