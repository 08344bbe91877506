package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestReplication opens members on primaries with streaming standbys.
func TestReplication(t *testing.T) {
	t.Run("an asynchronous standby is refused, naming the setting, unless allowed", func(t *testing.T) {
		primary := testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{})
		primary.StartStandby(t)
		g := newGroup(t, primary.URL())
		_, err := g.open("m1")
		want := "postgres store: 1 standby streams from postgres://postgres@" + primary.Addr() + "/postgres with synchronous_standby_names empty: " +
			"a commit acknowledged here can be lost when a standby is promoted (set synchronous_standby_names, e.g. '*' or 'ANY 1 (...)', " +
			"or store.allow_async_replication: true to accept that; the member's journal then recovers what a failover loses)"
		if err == nil || err.Error() != want {
			t.Fatalf("Open = %v,\nwant %s", err, want)
		}
		o := g.options("m1")
		o.AllowAsyncReplication = true
		s, err := g.openWith(o)
		if err != nil {
			t.Fatal(err)
		}
		if st := s.SharedStats(); st.AsyncReplication != "1 streaming standby, synchronous_standby_names empty" {
			t.Fatalf("AsyncReplication = %q", st.AsyncReplication)
		}
		if err := write(t.Context(), s, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := g.open(""); err != nil {
			t.Fatalf("a read-only handle: %v", err)
		}
	})
	t.Run("a synchronous standby is accepted, and a reconnect checks again", func(t *testing.T) {
		primary := testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{})
		setStandbyNames(t, primary.URL(), "*") // in postgresql.auto.conf, which a -c setting would override
		primary.StartStandby(t)
		g := newGroup(t, primary.URL())
		s := g.mustOpen("m1")
		if st := s.SharedStats(); st.AsyncReplication != "" {
			t.Fatalf("AsyncReplication = %q", st.AsyncReplication)
		}
		if err := write(t.Context(), s, 1); err != nil {
			t.Fatal(err)
		}
		setStandbyNames(t, primary.URL(), "")
		postgres.ResetPool(s)
		err := write(t.Context(), s, 2)
		if err == nil || !strings.Contains(err.Error(), "1 standby streams from postgres://postgres@"+primary.Addr()+"/postgres with synchronous_standby_names empty") {
			t.Fatalf("Update after a reconnect to an asynchronous primary = %v", err)
		}
		if st := s.SharedStats(); st.LastError != err.Error() {
			t.Fatalf("LastError = %q, want %q", st.LastError, err)
		}
	})
	t.Run("a standby is refused for a member, not for a read-only handle", func(t *testing.T) {
		primary := testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{Settings: []string{"synchronous_standby_names=*"}})
		standby := primary.StartStandby(t)
		gp := newGroup(t, primary.URL())
		gp.mustOpen("m1") // creates the schema
		g := newGroup(t, standby.URL())
		g.schema = gp.schema
		_, err := g.open("m2")
		want := "postgres store: postgres://postgres@" + standby.Addr() + "/postgres is a standby (in recovery): point store.url at the primary, " +
			"or list every host with target_session_attrs=read-write"
		if err == nil || err.Error() != want {
			t.Fatalf("Open on a standby = %v,\nwant %s", err, want)
		}
		waitFor(t, "the schema on the standby", func() bool {
			return count(t, standby.URL(), `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, g.schema) > 0
		})
		if _, err := g.open(""); err != nil {
			t.Fatalf("a read-only handle on the standby: %v", err)
		}
	})
}

// TestCommitTimeout commits on a primary whose commits wait for a
// synchronous standby that is not there.
func TestCommitTimeout(t *testing.T) {
	pg := testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.CommitTimeout = 500 * time.Millisecond
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	setStandbyNames(t, pg.URL(), "*")
	t.Cleanup(func() { // before Close, whose commits would wait too
		c, err := pgx.Connect(context.Background(), pg.URL())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		for _, sql := range []string{"ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()"} {
			if _, err := c.Exec(context.Background(), sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	waitSyncRepDefined(t, pg.URL())

	check := func(what string, err error, elapsed time.Duration, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "synchronous_standby_names = '*'") ||
			!errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s = %v, want %q naming synchronous_standby_names", what, err, want)
		}
		if elapsed < o.CommitTimeout || elapsed > o.CommitTimeout+3*time.Second {
			t.Fatalf("%s returned after %v, want about %v", what, elapsed, o.CommitTimeout)
		}
		if st := s.SharedStats(); st.LastError != err.Error() {
			t.Fatalf("LastError = %q, want %q", st.LastError, err)
		}
		t.Logf("%s after %v: %v", what, elapsed.Round(time.Millisecond), err)
	}
	start := time.Now()
	err = write(t.Context(), s, 1)
	check("Update", err, time.Since(start),
		"postgres store: the commit waited longer than 500ms (store.commit_timeout) for the server postgres://postgres@"+pg.Addr()+
			"/postgres and may or may not have happened: a synchronous standby that does not answer?")
	// The cancelled wait left the commit done here, not on a standby.
	start = time.Now()
	err = s.Commit(t.Context(), &engine.Batch{Keys: []engine.KeyEntry{keyEntry(2, time.Now())}, Audit: records("m1", 2, 1)})
	check("Commit", err, time.Since(start), "postgres store: the commit waited longer than 500ms (store.commit_timeout)")
	if st := s.SharedStats(); st.Failures != 2 {
		t.Fatalf("Failures = %d, want 2", st.Failures)
	}
}

// write writes key n and audit record n as member m1.
func write(ctx context.Context, s *postgres.Store, n int) error {
	return s.Update(ctx, &engine.Reads{Keys: []engine.Hash{key(n)}}, func(*engine.Rows) (*engine.Batch, error) {
		return &engine.Batch{Keys: []engine.KeyEntry{keyEntry(n, time.Now())}, Audit: records("m1", uint64(n), 1)}, nil
	})
}

// setStandbyNames sets the server's synchronous_standby_names and waits
// until a new connection sees it.
func setStandbyNames(t *testing.T, url, names string) {
	t.Helper()
	run(t, url, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'")
	run(t, url, "SELECT pg_reload_conf()")
	waitFor(t, "synchronous_standby_names = '"+names+"'", func() bool {
		return count(t, url, "SELECT count(*) WHERE current_setting('synchronous_standby_names') = $1", names) == 1
	})
}

// waitSyncRepDefined waits until a commit waits for a synchronous standby,
// which the checkpointer decides after the reload: a probe commit cut
// short by a cancel request then ends with the server's warning that its
// wait was cancelled. (statement_timeout ends before the commit.) The probe
// writes a logged table: a commit that wrote no WAL, as an insert into a
// temporary table once it exists, never waits, however long the loop runs.
func waitSyncRepDefined(t *testing.T, url string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	waited := make(chan struct{}, 1)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "synchronous replication") {
			select {
			case waited <- struct{}{}:
			default:
			}
		}
	}
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	waitFor(t, "a commit that waits for a synchronous standby", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, _ = c.Exec(ctx, "CREATE TABLE IF NOT EXISTS sync_rep_probe (n int); INSERT INTO sync_rep_probe VALUES (1)")
		if c.IsClosed() {
			t.Fatal("the probe's connection broke")
		}
		select {
		case <-waited:
			return true
		default:
			return false
		}
	})
}

// waitFor polls cond until it holds, for 10 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
