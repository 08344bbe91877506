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
// (a slow sql effect). Its lease is renewed meanwhile, though the batch
// holds the member's row, so a second process of the same member is
// refused while the first one lives. Once the first process stalls (its
// renewal stops) and the lease expires, the second one takes the member
// only once that batch committed, and goes on from its head; the first
// process writes nothing after. One chain, each record and each sql effect
// once.
func TestLeaseLostDuringALongBatch(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.LeaseTTL = time.Second
	a, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	run(t, g.url, `CREATE TABLE `+g.schema+`.applied (position bigint PRIMARY KEY)`)
	effect := func(pos int) []engine.SQLStatement {
		return []engine.SQLStatement{{Key: key(pos), Route: "meters", SQL: fmt.Sprintf(`INSERT INTO %s.applied VALUES (%d)`, g.schema, pos)}}
	}
	const batch = 5 * time.Second
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- a.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
			b := &engine.Batch{Audit: records("m1", 1, 1), SQL: effect(1)}
			b.SQL = append(b.SQL, engine.SQLStatement{Key: key(1), Route: "meters",
				SQL: fmt.Sprintf("SELECT pg_sleep(%g)", batch.Seconds())})
			return b, nil
		})
	}()
	time.Sleep(3 * o.LeaseTTL) // three lease lifetimes into the batch
	if st := a.SharedStats(); st.LeaseError != "" || !time.Now().Before(st.LeaseExpires) {
		t.Fatalf("the lease was not renewed during the batch (expires %v, error %q)", st.LeaseExpires, st.LeaseError)
	}
	if _, err := g.openWith(o); !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("open member m1 again while its process lives, in a long batch = %v, want ErrMemberHeld", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the batch ended (%v) before the refused open returned: the open waited for it", err)
	default:
	}
	// From here on the renewal does not run at all, as in a process that
	// stalls; the lease runs out while the batch still runs.
	postgres.Stall(a)
	time.Sleep(o.LeaseTTL + 200*time.Millisecond)
	b, err := g.openWith(o) // waits for the batch to commit
	if err != nil {
		t.Fatalf("open member m1 again once its lease expired: %v", err)
	}
	if d := time.Since(start); d < batch {
		t.Fatalf("the second process took the member %v into a batch that sleeps %v: before it committed", d, batch)
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
