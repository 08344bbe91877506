package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

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
