package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestARaisedTimeoutReachesTheRetriedBatch runs a sql effect whose trigger
// takes longer than the database's statement_timeout: the batch fails,
// quarantining nothing. Once an operator removes the timeout (ALTER
// DATABASE … RESET), the same batch, passed again, is applied: the
// member's connections do not keep the timeout they were opened with.
func TestARaisedTimeoutReachesTheRetriedBatch(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	run(t, pg.URL(), `ALTER DATABASE postgres SET statement_timeout = '1s'`)
	x := newSQLSetup(t, pg.URL(), postgres.SQLAdaptive, readingsDDL+`;
		CREATE FUNCTION {app}.slow() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF NEW.serial = 'slow' THEN PERFORM pg_sleep(2); END IF;
				RETURN NEW;
			END $$;
		CREATE TRIGGER slow BEFORE INSERT ON {app}.readings FOR EACH ROW EXECUTE FUNCTION {app}.slow()`, meterRoute())
	msgs := []engine.Message{reading("m1", 1, "0.5", ""), reading("m1", 2, "0.5", `,"serial":"slow"`)}
	_, err := x.e.Process(t.Context(), msgs)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("Process with a statement past statement_timeout = %v, want SQLSTATE 57014", err)
	}
	if n := x.count(`SELECT count(*) FROM ` + x.s.Schema() + `.audit`); n != 0 {
		t.Fatalf("%d audit records after the timeout, want 0", n)
	}

	run(t, pg.URL(), `ALTER DATABASE postgres RESET statement_timeout`)
	for i, d := range x.process(msgs...) {
		if d.Outcome != engine.Applied {
			t.Errorf("message %d with the timeout removed: %v %q", i, d.Outcome, d.Reason)
		}
	}
	if n := x.count(`SELECT count(*) FROM {app}.readings WHERE meter = 'm1'`); n != 2 {
		t.Fatalf("%d readings of m1, want 2", n)
	}
}
