package postgres_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestPruneSparesAKeyAppliedAgainMeanwhile: a member applies again a key
// that expired (its row is updated with a fresh time) while the pruning
// task deletes the expired keys. The pruning delete found the old row in
// its snapshot and waited for the member's row lock; the row it then holds
// is live, and must stay: a replay of the message within the TTL must find
// it.
func TestPruneSparesAKeyAppliedAgainMeanwhile(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.TTL = time.Hour
	a, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Member = "m2"
	pruner, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := a.Commit(t.Context(), &engine.Batch{Keys: []engine.KeyEntry{{Ordinal: uint64(old.UnixNano()), Key: key(1), Digest: key(-1), Time: old.UnixNano()}}}); err != nil {
		t.Fatal(err)
	}
	r := &engine.Reads{Keys: []engine.Hash{key(1)}, KeyCutoff: time.Now().Add(-time.Hour).UnixNano()}
	done := make(chan error, 1)
	go func() {
		done <- a.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
			now := time.Now()
			return &engine.Batch{
				Keys:  []engine.KeyEntry{{Ordinal: uint64(now.UnixNano()), Key: key(1), Digest: key(-1), Time: now.UnixNano()}},
				Audit: records("m1", 1, 1),
				// Holds the transaction open after the key's row was updated,
				// as a batch's sql effects do.
				SQL: []engine.SQLStatement{{Key: key(1), Route: "meters", SQL: "SELECT pg_sleep(1)"}},
			}, nil
		})
	}()
	time.Sleep(300 * time.Millisecond) // the key's row is updated and locked
	if _, err := pruner.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	k := key(1)
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.keys WHERE key = $1`, k[:]); n != 1 {
		t.Fatalf("the key applied again a moment ago is gone: pruning deleted a live key (%d rows)", n)
	}
}
