package postgres_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestASQLEffectCannotMakeTheCommitNotDurable runs sql effects that turn
// synchronous_commit off for the decision's transaction, or for the
// connection, and kills the server as soon as the batch has committed:
// every decision the store reported committed, which the broker's ack
// waits for, is there after the restart, and the store says that an
// effect changed the setting.
func TestASQLEffectCannotMakeTheCommitNotDurable(t *testing.T) {
	// The WAL writer flushes a commit that did not wait for its WAL only
	// after 10 s, and the background writer never: a kill before then
	// loses it.
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{"wal_writer_delay=10s", "bgwriter_lru_maxpages=0"}})
	for _, off := range []string{
		"SET LOCAL synchronous_commit = off",
		"SET synchronous_commit TO off",
		"SELECT set_config('synchronous_commit', 'off', true)",
		"SELECT set_config('synchronous_commit', 'off', false)",
	} {
		for _, mode := range sqlModes {
			t.Run(off+", "+mode.name, func(t *testing.T) { testSyncCommitKept(t, pg, "", off, mode.mode) })
		}
	}
}

// TestADeferredTriggerCannotMakeTheCommitNotDurable has a constraint
// trigger deferred to the commit turn synchronous_commit off for the
// transaction of the decisions whose sql effects fired it: the server runs
// it as it commits, after every statement of the batch, and each decision
// the store reported committed is still there after a kill.
func TestADeferredTriggerCannotMakeTheCommitNotDurable(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{"wal_writer_delay=10s", "bgwriter_lru_maxpages=0"}})
	for _, mode := range sqlModes {
		t.Run(mode.name, func(t *testing.T) {
			testSyncCommitKept(t, pg, `CREATE FUNCTION APP.async() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM set_config('synchronous_commit', 'off', true); RETURN NULL; END $$;
				CREATE CONSTRAINT TRIGGER async AFTER INSERT ON APP.readings DEFERRABLE INITIALLY DEFERRED
				FOR EACH ROW EXECUTE FUNCTION APP.async()`, "", mode.mode)
		})
	}
}

// testSyncCommitKept runs setup (APP standing for the effects' schema, with
// its table readings) and a route whose sql effects run off ("" none), then
// an insert into readings, and kills the server once the batch committed.
func testSyncCommitKept(t *testing.T, pg *testbroker.Postgres, setup, off string, mode postgres.SQLMode) {
	var logs bytes.Buffer
	g := newGroup(t, pg.URL())
	app := g.schema + "_app"
	run(t, pg.URL(), "CREATE SCHEMA "+app+"; CREATE TABLE "+app+".readings (msg_id text PRIMARY KEY, kwh numeric)")
	if setup != "" {
		run(t, pg.URL(), strings.ReplaceAll(setup, "APP.", app+"."))
	}
	var effects []engine.EffectSpec
	if off != "" {
		effects = append(effects, engine.EffectSpec{SQL: off})
	}
	effects = append(effects, engine.EffectSpec{SQL: "INSERT INTO " + app + ".readings (msg_id, kwh) VALUES ($1, $2)", Args: []string{"msgId", "kwh"}})
	o := g.options("m1")
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	postgres.SetSQLMode(s, mode)
	e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: effects}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var msgs []engine.Message
	for i := range 5 {
		msgs = append(msgs, reading("m1", i, "0.5", ""))
	}
	ds, err := e.Process(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if d.Outcome != engine.Applied {
			t.Fatalf("message %d: %v %q", i, d.Outcome, d.Reason)
		}
	}
	pg.Kill()
	pg.Restart()
	for table, want := range map[string]int64{app + ".readings": 5, g.schema + ".audit": 5} {
		if n := count(t, pg.URL(), "SELECT count(*) FROM "+table); n != want {
			t.Errorf("%s: %d rows after the server was killed, want the %d committed", table, n, want)
		}
	}
	if want := "a sql effect set synchronous_commit"; !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant %q", logs.String(), want)
	}
	postgres.Kill(s)
}
