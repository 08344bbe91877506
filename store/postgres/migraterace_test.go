package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// awaitWaiting waits until n sessions of the server at url wait for a lock
// of type lockType (pg_locks.locktype).
func awaitWaiting(t *testing.T, url, lockType string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if count(t, url, `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = $1`, lockType) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions never waited for a %s lock", n, lockType)
		}
	}
}

// holdMigration takes the migration lock of schema for the session c, as
// a member migrating it holds it, and returns the function that lets it go.
func holdMigration(t *testing.T, c *pgx.Conn, schema string) func() {
	t.Helper()
	if _, err := c.Exec(t.Context(), `SELECT pg_advisory_lock(hashtext('replayguard migrate ' || $1))`, schema); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := c.Exec(t.Context(), `SELECT pg_advisory_unlock(hashtext('replayguard migrate ' || $1))`, schema); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMembersOfANewBuildStartingAtOnceMigrateOnce starts two members of
// this build at once on a schema of an earlier version, on a server whose
// sessions default to repeatable read: both wait for the migration lock,
// the first migrates and the second finds the work done. A member of the
// earlier build whose lease ran out while it stalled holds nothing after
// the migration, so it cannot renew the lease and go on.
func TestMembersOfANewBuildStartingAtOnceMigrateOnce(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL()+"&default_transaction_isolation=repeatable%20read")
	createWithGoStrings(t, g)
	run(t, g.url, `INSERT INTO `+g.schema+`.members (member, holder, lease_expires)
		VALUES ('stalled', 'otherhost 4243 cafe', clock_timestamp() - interval '1 second')`)
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	release := holdMigration(t, c, g.schema)
	errs := make(chan error, 2)
	for _, m := range []string{"m1", "m2"} {
		go func() {
			s, err := g.open(m)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	awaitWaiting(t, pg.URL(), "advisory", 2)
	release()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a member starting at once with another: %v", err)
		}
	}
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("schema version %d, want %d", n, postgres.SchemaVersion)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.members WHERE member = 'stalled' AND holder <> ''`); n != 0 {
		t.Fatal("the stalled member of the earlier build still holds its lease after the migration")
	}
}

// TestAMigrationWaitsForAMemberTakingItsLease holds a member's lease row
// while the member starts: until the member has taken its lease, the
// migration lock is held (shared), so a later build cannot migrate the
// schema between the member's check of its version and its lease.
func TestAMigrationWaitsForAMemberTakingItsLease(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	if err := g.mustOpen("m1").Close(); err != nil { // registered, the schema current
		t.Fatal(err)
	}
	hold, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(context.Background())
	tx, err := hold.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT FROM `+g.schema+`.leases WHERE member = 'm1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		s, err := g.open("m1")
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	awaitWaiting(t, pg.URL(), "transactionid", 1) // the member's lease take waits for the row
	var migrating bool
	if err := hold.QueryRow(t.Context(), `SELECT pg_try_advisory_lock(hashtext('replayguard migrate ' || $1))`, g.schema).Scan(&migrating); err != nil {
		t.Fatal(err)
	}
	if migrating {
		t.Error("a migration could take its lock while a member that had checked the schema's version was taking its lease")
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open once the row was let go: %v", err)
	}
}
