package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestLeaseLostDuringALongBatch: a batch runs for several lease lifetimes
// (a slow sql effect), and its lease is not renewed meanwhile: the batch
// holds the member's row, which the renewal waits for until it gives up.
// A second process of the same member, opened while the lease is expired
// (and no longer renewed), takes the member only once that batch committed, and goes on from its
// head; the first process writes nothing after. One chain, each record and
// each sql effect once.
func TestLeaseLostDuringALongBatch(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.LeaseTTL = 300 * time.Millisecond
	a, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	run(t, g.url, `CREATE TABLE `+g.schema+`.applied (position bigint PRIMARY KEY)`)
	effect := func(pos int) []engine.SQLStatement {
		return []engine.SQLStatement{{Key: key(pos), Route: "meters", SQL: fmt.Sprintf(`INSERT INTO %s.applied VALUES (%d)`, g.schema, pos)}}
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- a.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
			b := &engine.Batch{Audit: records("m1", 1, 1), SQL: effect(1)}
			b.SQL = append(b.SQL, engine.SQLStatement{Key: key(1), Route: "meters", SQL: "SELECT pg_sleep(1.5)"})
			return b, nil
		})
	}()
	time.Sleep(900 * time.Millisecond) // three lease lifetimes into the batch
	if st := a.SharedStats(); st.LeaseError == "" || time.Now().Before(st.LeaseExpires) {
		t.Fatalf("the lease was renewed during the batch (expires %v, error %q)", st.LeaseExpires, st.LeaseError)
	}
	// From here on the renewal does not run at all, as in a process that
	// stalls: else one that waits for the row too may come first, and
	// keep the member.
	postgres.Stall(a)
	b, err := g.openWith(o) // waits for the batch to commit
	if err != nil {
		t.Fatalf("open member m1 again once its lease expired: %v", err)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("the second process took the member %v into a batch that sleeps 1.5 s: before it committed", d)
	}
	if err := <-done; err != nil {
		t.Fatalf("the long batch, committed before the takeover: %v", err)
	}
	head, err := b.Head(t.Context())
	if err != nil || head.Position != 1 {
		t.Fatalf("the new process starts at head %d (%v), want 1: the long batch's", head.Position, err)
	}
	second := records("m1", 1, 2)[1:]
	if err := b.Commit(t.Context(), &engine.Batch{Audit: second, SQL: effect(2)}); err != nil {
		t.Fatalf("the new process's batch after the head: %v", err)
	}
	err = a.Commit(t.Context(), &engine.Batch{Audit: second, SQL: effect(2)})
	if !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("a batch of the first process after the takeover = %v, want ErrMemberHeld", err)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.audit`); n != 2 {
		t.Fatalf("the chain holds %d records, want 2", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.applied`); n != 2 {
		t.Fatalf("%d sql effects applied, want 2", n)
	}
	var prev engine.Hash
	err = b.ScanChain(t.Context(), "m1", 1, func(r engine.AuditRecord) error {
		if r.Prev != prev {
			return errors.New("forked")
		}
		prev = r.Hash
		return nil
	})
	if err != nil {
		t.Fatalf("the chain: %v", err)
	}
}
