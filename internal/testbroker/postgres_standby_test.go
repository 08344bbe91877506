package testbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestPostgresStandby fails a primary over to its standby the way
// BROKERS.md makes the loss certain: the walsender paused while commits
// go on, the primary killed, the standby promoted.
func TestPostgresStandby(t *testing.T) {
	t.Run("an asynchronous standby promoted lacks commits the primary acknowledged", func(t *testing.T) {
		f := failover(t, false)
		if f.lost < f.afterPause {
			t.Fatalf("%d of %d acknowledged rows are missing on the promoted standby, want at least the %d written while the walsender was paused",
				f.lost, f.acked, f.afterPause)
		}
		t.Logf("%d of %d acknowledged rows lost", f.lost, f.acked)
		conn := connectURL(t, testbroker.MultiHostURL(f.primary, f.standby))
		if got := conn.PgConn().Conn().RemoteAddr().String(); got != f.standby.Addr() {
			t.Fatalf("the multi-host URL reached %s, want the promoted standby at %s", got, f.standby.Addr())
		}
		exec(t, conn, "INSERT INTO r VALUES (-1)")
	})
	t.Run("a synchronous standby promoted has every commit the primary acknowledged", func(t *testing.T) {
		f := failover(t, true)
		if f.lost != 0 {
			t.Fatalf("%d of %d acknowledged rows are missing on the promoted standby", f.lost, f.acked)
		}
		// Its synchronous_standby_names is empty: a commit waits for nobody.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := connect(t, f.standby).Exec(ctx, "INSERT INTO r VALUES (-1)"); err != nil {
			t.Fatalf("write on the promoted standby: %v", err)
		}
	})
}

type failedOver struct {
	primary, standby *testbroker.Postgres
	acked            int // rows whose commit returned on the primary, ids 1…acked
	afterPause       int // of which while the walsender was paused
	lost             int // acknowledged rows missing on the promoted standby
}

// failover writes rows in small transactions, pauses the walsender, writes
// more (with a synchronous standby, one commit that waits), kills the
// primary and promotes its standby.
func failover(t *testing.T, sync bool) failedOver {
	var settings []string
	if sync {
		settings = append(settings, "synchronous_standby_names=*")
	}
	f := failedOver{primary: testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{Settings: settings})}
	f.standby = f.primary.StartStandby(t)
	conn := connect(t, f.primary)
	exec(t, conn, "CREATE TABLE r (id int PRIMARY KEY)")
	insert := func(ctx context.Context) error {
		_, err := conn.Exec(ctx, "INSERT INTO r VALUES ($1)", f.acked+1)
		if err == nil {
			f.acked++
		}
		return err
	}
	for range 200 {
		if err := insert(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.primary.WALSenders()) == 0 {
		t.Fatal("no walsender")
	}
	f.primary.PauseWALSender()
	if !sync {
		for range 100 {
			if err := insert(t.Context()); err != nil {
				t.Fatal(err)
			}
			f.afterPause++
		}
		f.primary.KillAll()
	} else {
		done := make(chan error, 1)
		go func() { done <- insert(context.Background()) }()
		waitSyncRep(t, f.primary)
		f.primary.KillAll()
		if err := <-done; err == nil {
			t.Fatal("a commit waiting for the paused synchronous standby returned without error")
		}
	}
	f.standby.Promote()
	f.lost = missing(t, connect(t, f.standby), f.acked)
	return f
}

// waitSyncRep waits until a session on p waits for a synchronous standby.
func waitSyncRep(t *testing.T, p *testbroker.Postgres) {
	t.Helper()
	conn := connect(t, p)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no commit waits for the synchronous standby")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// missing counts the ids 1…n that table r lacks.
func missing(t *testing.T, conn *pgx.Conn, n int) int {
	t.Helper()
	var have int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM r WHERE id BETWEEN 1 AND $1", n).Scan(&have); err != nil {
		t.Fatal(err)
	}
	return n - have
}

func connectURL(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
