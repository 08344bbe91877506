package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestLeaseRenewalAfterATakeover: a process whose lease ran out (it
// stalled) renews it while another process of the same member takes the
// member over, waiting for the member's row, which a batch holds (here a
// transaction of the test's). The renewal waits for the takeover's lease
// row lock, and once the takeover committed the member is the second
// process's: the renewal is refused, and the first process does not
// report a lease it no longer has.
func TestLeaseRenewalAfterATakeover(t *testing.T) {
	// A renewal waits up to a third of the lease for the row: the test
	// must see it waiting, and commit, within that, however busy the
	// machine (at 500 ms it did not, once, with the machine at full load).
	g, o, a, tx := expiredWithItsRowHeld(t, 6*time.Second)
	opened := make(chan error, 1)
	go func() {
		_, err := g.openWith(o) // locks the lease row, waits for the member's
		opened <- err
	}()
	waitForLockWaits(t, g, 1)
	renewed := make(chan error, 1)
	go func() { renewed <- postgres.Renew(a) }() // waits for the lease row
	waitForLockWaits(t, g, 2)
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("take the member over once its lease ran out: %v", err)
	}
	if err := <-renewed; !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("the first process's renewal, racing the takeover = %v, want ErrMemberHeld", err)
	}
	if st := a.SharedStats(); time.Now().Before(st.LeaseExpires) {
		t.Fatalf("the first process reports its lease held until %v after another took it", st.LeaseExpires)
	}
}

// TestLeaseTakenAfterAWait: a takeover that waited for a batch of the old
// holder's longer than the lease (here a transaction of the test's holds
// the member's row) takes a lease that runs from its end, not from its
// start: else the lease is expired when taken, and another process may
// take the member, or another member its outbox and chain, at once.
func TestLeaseTakenAfterAWait(t *testing.T) {
	g, o, _, tx := expiredWithItsRowHeld(t, time.Second)
	type opened struct {
		s   *postgres.Store
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := g.openWith(o) // waits for the member's row
		ch <- opened{s, err}
	}()
	waitForLockWaits(t, g, 1)
	time.Sleep(o.LeaseTTL + 200*time.Millisecond) // the wait outlasts a lease
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b.err != nil {
		t.Fatalf("take the member over once its lease ran out: %v", b.err)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.leases WHERE member = 'm1' AND expires > now()`); n != 1 {
		t.Fatal("the lease taken after the wait is expired already")
	}
	if st := b.s.SharedStats(); !time.Now().Before(st.LeaseExpires) {
		t.Fatalf("the lease taken after the wait expires at %v, before it was taken", st.LeaseExpires)
	}
}

// expiredWithItsRowHeld opens member m1 with a lease of ttl, stalls its
// renewal until the lease ran out, and holds its members row in a
// transaction of the test's, as a batch of the stalled process would.
func expiredWithItsRowHeld(t *testing.T, ttl time.Duration) (*group, postgres.Options, *postgres.Store, pgx.Tx) {
	t.Helper()
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.LeaseTTL = ttl
	a, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	postgres.Stall(a)
	time.Sleep(o.LeaseTTL + 100*time.Millisecond)
	c, err := pgx.Connect(t.Context(), g.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT FROM `+g.schema+`.members WHERE member = 'm1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return g, o, a, tx
}

// waitForLockWaits waits until n statements of g's database wait for a
// lock: those the test started, in the order it needs them.
func waitForLockWaits(t *testing.T, g *group, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, g.url, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d statements never waited for a lock", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
