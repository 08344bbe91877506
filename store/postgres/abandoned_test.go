package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestASessionLeftInACopyIsEnded: a member whose network went silent while
// the server waited for its COPY's rows leaves a session no server timeout
// ends, holding what its batch locked. The group's members end it once it
// has been in its transaction for twice store.commit_timeout, and their
// batches go on; a session of another program holding locks on the same
// tables, and a member's idle between statements, are left alone.
func TestASessionLeftInACopyIsEnded(t *testing.T) {
	pg := testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.CommitTimeout, o.LeaseTTL = time.Second, 1500*time.Millisecond // a renewal, and a look, every 0.5 s
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(t.Context(), s, 1); err != nil {
		t.Fatal(err)
	}
	members := pgx.Identifier{g.schema, "members"}.Sanitize()
	keys := pgx.Identifier{g.schema, "keys"}.Sanitize()

	// Another program's session in a transaction on the group's tables,
	// and a member's idle between two statements (the server's timeout
	// ends those): neither is ended here.
	other := connectAs(t, pg.URL(), "psql")
	idle := connectAs(t, pg.URL(), postgres.ApplicationName("m3"))
	for _, c := range []*pgx.Conn{other, idle} {
		if _, err := c.Exec(t.Context(), "BEGIN; SELECT count(*) FROM "+keys); err != nil {
			t.Fatal(err)
		}
	}
	// A member's session: the member row locked, then a COPY whose rows
	// never come.
	silent := connectAs(t, pg.URL(), postgres.ApplicationName("m2"))
	began := time.Now() // before its transaction begins on the server
	if _, err := silent.Exec(t.Context(), "BEGIN; SELECT 1 FROM "+members+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	never, finished := make(chan struct{}), make(chan struct{})
	defer func() { close(never); <-finished }() // before the connection closes
	copied := make(chan error, 1)
	go func() {
		defer close(finished)
		_, err := silent.PgConn().CopyFrom(context.Background(), blockingReader(never), "COPY "+keys+" FROM STDIN (FORMAT binary)")
		copied <- err
	}()

	// m1's batches wait for the member row until the session is ended.
	var wrote time.Duration
	for deadline := time.Now().Add(15 * time.Second); ; {
		err := write(t.Context(), s, 2)
		if err == nil {
			wrote = time.Since(began)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m1 still could not write 15s after the session went silent: %v", err)
		}
	}
	select {
	case err := <-copied:
		if err == nil || !strings.Contains(err.Error(), "terminat") && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "closed") {
			t.Fatalf("the silent session's COPY ended with %v, want its session ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("m1 wrote, but the silent session's COPY goes on")
	}
	if wrote < 2*o.CommitTimeout {
		t.Fatalf("m1 wrote %v after the session went silent: it was ended before twice store.commit_timeout", wrote)
	}
	t.Logf("m1 wrote %v after the session went silent", wrote.Round(time.Millisecond))
	for name, c := range map[string]*pgx.Conn{"the other program's session": other, "the member's idle session": idle} {
		var one int
		if err := c.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("%s was ended too: %v", name, err)
		}
	}
}

// connectAs connects to url as application name app, closed at the
// test's end.
func connectAs(t *testing.T, url, app string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = app
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// blockingReader is a reader whose Read waits until done is closed.
type blockingReader chan struct{}

func (r blockingReader) Read([]byte) (int, error) {
	<-r
	return 0, context.Canceled
}
