package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// withSetting is u with a run-time parameter set on every connection
// ("lock_timeout=200").
func withSetting(t *testing.T, u, setting string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set("options", "-c "+setting)
	p.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads a + as itself
	return p.String()
}

// TestAStatementCancelledWhileItWaitsSaysWhatItWaitedFor holds the row of
// the user's table that a batch's second sql effect updates, on a member
// whose connections have a short lock_timeout, or statement_timeout: the
// server cancels the statement as it waits. The batch fails, holding and
// committing nothing, with an error that says what is known: the
// server's words and SQLSTATE, the row it waited for as the server tells
// it, the route, the effect and its statement, and that the batch will be
// retried. Once the row is free, the same batch is applied.
func TestAStatementCancelledWhileItWaitsSaysWhatItWaitedFor(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	route := engine.Route{Name: "cells", Topic: "cells/+", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{
			{SQL: "INSERT INTO {app}.applied (msg_id) VALUES ($1)", Args: []string{"msgId"}},
			{SQL: "UPDATE {app}.cells SET n = n + 1 WHERE id = $1", Args: []string{"cell"}},
		}}
	const ddl = `CREATE TABLE {app}.cells (id int PRIMARY KEY, n bigint NOT NULL);
		INSERT INTO {app}.cells VALUES (1, 0);
		CREATE TABLE {app}.applied (msg_id text NOT NULL)`
	for _, tc := range []struct{ setting, server string }{
		{"lock_timeout", "ERROR: canceling statement due to lock timeout (SQLSTATE 55P03)"},
		{"statement_timeout", "ERROR: canceling statement due to statement timeout (SQLSTATE 57014)"},
	} {
		for _, mode := range sqlModes {
			t.Run(tc.setting+", "+mode.name, func(t *testing.T) {
				x := newSQLSetup(t, pg.URL(), mode.mode, ddl, route)
				// Set once the store is open, whose schema's creation may
				// take longer than the timeout; its connections opened
				// again take it.
				run(t, pg.URL(), `ALTER DATABASE postgres SET `+tc.setting+` = '200ms'`)
				t.Cleanup(func() {
					c, err := pgx.Connect(context.Background(), pg.URL())
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close(context.Background())
					if _, err := c.Exec(context.Background(), `ALTER DATABASE postgres RESET `+tc.setting); err != nil {
						t.Fatal(err)
					}
				})
				postgres.ResetPool(x.s)
				hold, err := pgx.Connect(t.Context(), pg.URL())
				if err != nil {
					t.Fatal(err)
				}
				defer hold.Close(context.Background())
				if _, err := hold.Exec(t.Context(), x.sql(`BEGIN; SELECT FROM {app}.cells WHERE id = 1 FOR UPDATE`)); err != nil {
					t.Fatal(err)
				}
				msg := engine.Message{Topic: "cells/c1", Payload: []byte(`{"msgId":"c1-1","cell":1}`)}
				_, err = x.e.Process(t.Context(), []engine.Message{msg})
				want := `postgres store: route "cells" effects[1]: sql: ` + tc.server +
					`, while updating tuple (0,1) in relation "cells"; statement "UPDATE ` + x.app +
					`.cells SET n = n + 1 WHERE id = $1"; nothing was committed, and the batch will be retried`
				if err == nil || err.Error() != want {
					t.Fatalf("Process with the row held = %v\nwant %s", err, want)
				}
				for table, n := range map[string]int64{
					x.s.Schema() + ".audit": 0, x.s.Schema() + ".quarantine": 0, "{app}.applied": 0,
				} {
					if got := x.count(`SELECT count(*) FROM ` + table); got != n {
						t.Errorf("%s: %d rows after the timeout, want %d", table, got, n)
					}
				}
				if _, err := hold.Exec(t.Context(), `ROLLBACK`); err != nil {
					t.Fatal(err)
				}
				if d := x.process(msg)[0]; d.Outcome != engine.Applied {
					t.Fatalf("the batch with the row free: %v %q", d.Outcome, d.Reason)
				}
				if n := x.count(`SELECT n FROM {app}.cells WHERE id = 1`); n != 1 {
					t.Fatalf("the counter is %d, want 1", n)
				}
			})
		}
	}
}

// TestAReadCancelledWhileItWaitsSaysWhatItWaitedFor holds a source's row
// that a member's next batch reads under its lock, on a member whose
// connections have a short lock_timeout (the user's role or database may
// set one): the server ends the batch's wait. The batch fails, committing
// nothing, with an error that gives the server's words, the row it waited
// for and that the batch will be retried, rather than taking the wait for
// a lock found held when asked for with NOWAIT. Once the row is free the
// same batch is applied.
func TestAReadCancelledWhileItWaitsSaysWhatItWaitedFor(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	o := g.options("m1")
	o.URL = withSetting(t, pg.URL(), "lock_timeout=200")
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	route := engine.Route{Name: "seq", Topic: "s/+", Source: []string{"topic[1]"}, Sequence: "seq"}
	e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{route}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(seq int) engine.Message {
		return engine.Message{Topic: "s/a", Payload: fmt.Appendf(nil, `{"seq":%d}`, seq)}
	}
	if _, err := e.Process(t.Context(), []engine.Message{msg(1)}); err != nil {
		t.Fatal(err)
	}
	hold, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(context.Background())
	if _, err := hold.Exec(t.Context(), `BEGIN; SELECT FROM `+g.schema+`.sources FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	_, err = e.Process(t.Context(), []engine.Message{msg(2)})
	want := `postgres store: reading the member's row and the batch's sources and entities under their locks: ` +
		`ERROR: canceling statement due to lock timeout (SQLSTATE 55P03), while locking tuple (…) in relation "sources"; ` +
		`nothing was committed, and the batch will be retried`
	tuple := regexp.MustCompile(`tuple \(\d+,\d+\)`)
	if err == nil || tuple.ReplaceAllString(err.Error(), "tuple (…)") != want {
		t.Fatalf("Process with the source's row held = %v\nwant %s", err, want)
	}
	if n := count(t, pg.URL(), `SELECT count(*) FROM `+g.schema+`.audit`); n != 1 {
		t.Fatalf("%d audit records, want the first batch's 1", n)
	}
	if _, err := hold.Exec(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	ds, err := e.Process(t.Context(), []engine.Message{msg(2)})
	if err != nil || ds[0].Outcome != engine.Applied {
		t.Fatalf("the batch with the row free: %+v, %v", ds, err)
	}
}
