package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// sqlSetup is one member's engine on a group store whose routes run sql
// effects into tables of the user's own, in a schema next to the store's.
type sqlSetup struct {
	t   *testing.T
	url string
	app string // the user's schema
	s   *postgres.Store
	e   *engine.Engine
}

// newSQLSetup creates the user's schema, runs ddl in it ("{app}" is its
// name, in ddl and in the routes' statements) and opens member m1's engine.
func newSQLSetup(t *testing.T, url string, mode postgres.SQLMode, ddl string, routes ...engine.Route) *sqlSetup {
	t.Helper()
	g := newGroup(t, url)
	x := &sqlSetup{t: t, url: url, app: g.schema + "_app"}
	run(t, url, "CREATE SCHEMA "+x.app+"; "+x.sql(ddl))
	x.s = g.mustOpen("m1")
	postgres.SetSQLMode(x.s, mode)
	for i := range routes {
		routes[i].Effects = append([]engine.EffectSpec(nil), routes[i].Effects...)
		for j := range routes[i].Effects {
			routes[i].Effects[j].SQL = x.sql(routes[i].Effects[j].SQL)
		}
	}
	e, err := engine.New(t.Context(), x.s, engine.Options{Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	x.e = e
	return x
}

func (x *sqlSetup) sql(s string) string { return strings.ReplaceAll(s, "{app}", x.app) }

func (x *sqlSetup) run(sql string, args ...any) { x.t.Helper(); run(x.t, x.url, x.sql(sql), args...) }

func (x *sqlSetup) count(sql string, args ...any) int64 {
	x.t.Helper()
	return count(x.t, x.url, x.sql(sql), args...)
}

func (x *sqlSetup) process(msgs ...engine.Message) []engine.Decision {
	x.t.Helper()
	ds, err := x.e.Process(x.t.Context(), msgs)
	if err != nil {
		x.t.Fatal(err)
	}
	return ds
}

// readingsDDL is the user's table of meter readings, with a unique
// constraint of its own on serial, a row that holds serial "taken", and a
// trigger of the user's that raises an exception for serial "recalled",
// one with a SQLSTATE of its own for serial "unlisted", and finds no row
// in a SELECT INTO STRICT for serial "unknown".
const readingsDDL = `CREATE TABLE {app}.readings (
		msg_id text NOT NULL, meter text NOT NULL, kwh numeric(4,2), serial text UNIQUE, at timestamptz);
	INSERT INTO {app}.readings (msg_id, meter, kwh, serial) VALUES ('seed', 'm0', 0, 'taken');
	CREATE FUNCTION {app}.refuse_recalled() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE found text;
		BEGIN
			IF NEW.serial = 'recalled' THEN RAISE EXCEPTION 'meter % is recalled', NEW.meter; END IF;
			IF NEW.serial = 'unlisted' THEN RAISE EXCEPTION 'meter % is not on the list', NEW.meter USING ERRCODE = 'RG001'; END IF;
			IF NEW.serial = 'unknown' THEN SELECT meter INTO STRICT found FROM {app}.readings WHERE serial = 'none'; END IF;
			RETURN NEW;
		END $$;
	CREATE TRIGGER refuse_recalled BEFORE INSERT ON {app}.readings FOR EACH ROW EXECUTE FUNCTION {app}.refuse_recalled()`

// incompressible is n letters that the server cannot compress, so that
// an index row holding them is n bytes long.
func incompressible(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b, x := make([]byte, n), uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = letters[x%uint32(len(letters))]
	}
	return string(b)
}

// meterRoute adds each reading to its meter's entity and inserts it into
// the readings table.
func meterRoute() engine.Route {
	return engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{
			{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}},
			{SQL: "INSERT INTO {app}.readings (msg_id, meter, kwh, serial, at) VALUES ($1, $2, $3, $4, $5)",
				Args: []string{"msgId", "topic[1]", "kwh", "serial", "at"}},
		}}
}

// reading is message n of meter, with kwh as JSON and extra fields.
func reading(meter string, n int, kwh, extra string) engine.Message {
	return engine.Message{Topic: "plant/" + meter + "/energy",
		Payload: fmt.Appendf(nil, `{"msgId":"%s-%d","kwh":%s%s}`, meter, n, kwh, extra)}
}

// sqlModes are the store's ways of finding refused messages.
var sqlModes = []struct {
	name string
	mode postgres.SQLMode
}{
	{"with one savepoint, then one per message", postgres.SQLAdaptive},
	{"decided again per refusal", postgres.SQLRerun},
	{"with a savepoint per message", postgres.SQLSavepoints},
}

// TestSQLEffects runs sql effects on one server, each test on a schema of
// its own.
func TestSQLEffects(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	for _, mode := range sqlModes {
		t.Run("refused messages are quarantined and the rest of the batch commits, "+mode.name, func(t *testing.T) {
			testRefused(t, newSQLSetup(t, pg.URL(), mode.mode, readingsDDL, meterRoute()))
		})
	}
	t.Run("values keep their JSON meaning", func(t *testing.T) { testValues(t, pg.URL()) })
	t.Run("a released message whose statement now succeeds runs it once", func(t *testing.T) {
		testReleaseRefused(t, newSQLSetup(t, pg.URL(), postgres.SQLAdaptive, readingsDDL, meterRoute()))
	})
	t.Run("a statement that fails to prepare fails the batch and quarantines nothing", func(t *testing.T) {
		testStatementBroken(t, pg.URL())
	})
	for _, mode := range sqlModes {
		t.Run("a statement that fails to prepare is named in the batch's error, "+mode.name, func(t *testing.T) {
			testUnpreparedNamed(t, pg.URL(), mode.mode)
		})
	}
	for _, mode := range sqlModes {
		t.Run("a message that breaks a deferred constraint is quarantined at commit, "+mode.name, func(t *testing.T) {
			testDeferredConstraint(t, pg.URL(), mode.mode)
		})
	}
}

// partsDDL is the user's parts, each of a known meter (a foreign key
// checked at commit), and a constraint trigger, also run at commit, that
// refuses a part named "scrap".
const partsDDL = `CREATE TABLE {app}.meters (meter text PRIMARY KEY);
	INSERT INTO {app}.meters VALUES ('m0'), ('m1');
	CREATE TABLE {app}.parts (part text PRIMARY KEY,
		meter text REFERENCES {app}.meters DEFERRABLE INITIALLY DEFERRED);
	CREATE FUNCTION {app}.refuse_scrap() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.part = 'scrap' THEN RAISE EXCEPTION 'part % is scrapped', NEW.part; END IF;
			RETURN NULL;
		END $$;
	CREATE CONSTRAINT TRIGGER refuse_scrap AFTER INSERT ON {app}.parts
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {app}.refuse_scrap()`

// testDeferredConstraint runs a batch in which two messages break
// constraints the server checks only at commit: they are held, and the
// rest of the batch commits, a message whose own statements satisfy a
// deferred constraint only at their end included.
func testDeferredConstraint(t *testing.T, url string, mode postgres.SQLMode) {
	x := newSQLSetup(t, url, mode, partsDDL, engine.Route{Name: "parts", Topic: "parts/+", Source: []string{"topic[1]"}, ID: "part",
		Effects: []engine.EffectSpec{
			// the part first, its meter after it when the message names one
			{SQL: "INSERT INTO {app}.parts (part, meter) VALUES ($1, $2)", Args: []string{"part", "meter"}},
			{SQL: "INSERT INTO {app}.meters SELECT $1::text WHERE $1::text IS NOT NULL", Args: []string{"newMeter"}},
		}})
	msg := func(p string) engine.Message { return engine.Message{Topic: "parts/line1", Payload: []byte(p)} }
	msgs := []engine.Message{
		msg(`{"part":"p1","meter":"m0"}`),
		msg(`{"part":"p2","meter":"m7"}`), // no such meter
		msg(`{"part":"p3","meter":"m8","newMeter":"m8"}`),
		msg(`{"part":"scrap","meter":"m1"}`),
		msg(`{"part":"p5","meter":"m1"}`),
	}
	want := map[int]string{
		1: `sql effects: SQLSTATE 23503 at the end of the message's statements: insert or update on table "parts" violates foreign key constraint "parts_meter_fkey" (Key (meter)=(m7) is not present in table "meters".)`,
		3: `sql effects: SQLSTATE P0001 at the end of the message's statements: part scrap is scrapped`,
	}
	for i, d := range x.process(msgs...) {
		if r, refused := want[i]; refused {
			if d.Outcome != engine.Quarantined || d.Reason != r {
				t.Errorf("message %d: %v %q, want quarantined %q", i, d.Outcome, d.Reason, r)
			}
		} else if d.Outcome != engine.Applied {
			t.Errorf("message %d: %v %q, want applied", i, d.Outcome, d.Reason)
		}
	}
	if got := x.count(`SELECT count(*) FROM {app}.parts WHERE part IN ('p1', 'p3', 'p5')`); got != 3 || x.count(`SELECT count(*) FROM {app}.parts`) != 3 {
		t.Errorf("parts: %d of the 3 applied, %d in all", got, x.count(`SELECT count(*) FROM {app}.parts`))
	}
	// The next batch runs as batches do: a part whose meter comes in a
	// later message of the same batch is taken, as the constraint allows.
	for i, d := range x.process(msg(`{"part":"p6","meter":"m9"}`), msg(`{"part":"p7","meter":"m0","newMeter":"m9"}`)) {
		if d.Outcome != engine.Applied {
			t.Errorf("next batch, message %d: %v %q, want applied", i, d.Outcome, d.Reason)
		}
	}
}

func testRefused(t *testing.T, x *sqlSetup) {
	var msgs []engine.Message
	for i := range 12 {
		kwh, extra := "0.25", ""
		switch i {
		case 10:
			extra = `,"serial":"unlisted"` // the user's trigger raises a code of its own: RG001
		case 11:
			extra = `,"serial":"unknown"` // the user's trigger finds no row: P0002
		case 3:
			extra = `,"serial":"taken"` // the user's unique constraint: 23505
		case 6:
			kwh = "123.456" // numeric(4,2) overflows: 22003
		case 8:
			extra = `,"at":"not a time"` // a bad cast: 22007
		case 1:
			extra = `,"serial":"` + incompressible(3000) + `"` // too long for the unique key's index: 54000
		case 5:
			extra = `,"serial":"recalled"` // the user's trigger raises: P0001
		}
		msgs = append(msgs, reading(fmt.Sprintf("m%d", i%2), i, kwh, extra))
	}
	ds := x.process(msgs...)
	want := map[int]string{
		3:  `sql effects[1]: SQLSTATE 23505: duplicate key value violates unique constraint "readings_serial_key" (Key (serial)=(taken) already exists.)`,
		6:  `sql effects[1]: SQLSTATE 22003: numeric field overflow (A field with precision 4, scale 2 must round to an absolute value less than 10^2.)`,
		8:  `sql effects[1]: SQLSTATE 22007: invalid input syntax for type timestamp with time zone: "not a time"`,
		1:  `sql effects[1]: SQLSTATE 54000: index row size 3016 exceeds btree version 4 maximum 2704 for index "readings_serial_key" (Index row references tuple (…) in relation "readings".)`,
		5:  `sql effects[1]: SQLSTATE P0001: meter m1 is recalled`,
		10: `sql effects[1]: SQLSTATE RG001: meter m0 is not on the list`,
		11: `sql effects[1]: SQLSTATE P0002: query returned no rows`,
	}
	// where the server put the row it could not index differs from run to run
	tuple := regexp.MustCompile(`tuple \(\d+,\d+\)`)
	for i, d := range ds {
		if r, refused := want[i]; refused {
			if d.Outcome != engine.Quarantined || tuple.ReplaceAllString(d.Reason, "tuple (…)") != r {
				t.Errorf("message %d: %v %q, want quarantined %q", i, d.Outcome, d.Reason, r)
			}
			q, err := x.s.Quarantined(t.Context(), x.s.QuarantineBase()+d.Position)
			if err != nil || q.Reason != d.Reason || !bytes.Equal(q.Payload, msgs[i].Payload) || q.Key != d.Key.String() {
				t.Errorf("message %d: quarantine entry %+v, %v", i, q, err)
			}
		} else if d.Outcome != engine.Applied {
			t.Errorf("message %d: %v %q, want applied", i, d.Outcome, d.Reason)
		}
	}
	got := x.count(`SELECT count(*) FROM {app}.readings WHERE msg_id IN ('m0-0','m0-2','m0-4','m1-7','m1-9')`)
	if n := x.count(`SELECT count(*) FROM {app}.readings`); got != 5 || n != 6 {
		t.Errorf("readings: %d of the 5 applied, %d rows with the seed", got, n)
	}
	kwh := fieldOf(loaded(t, x.s), "kwh")
	if fmt.Sprint(kwh) != "map[meter/m0:0.75 meter/m1:0.5]" {
		t.Errorf("entities %v: the refused messages' projections must not apply", kwh)
	}
	if n := x.count(`SELECT count(*) FROM ` + x.s.Schema() + `.keys`); n != 5 {
		t.Errorf("%d keys stored, want the 5 applied", n)
	}
	if st := x.s.SharedStats(); st.Updates != 1 || st.Retries != 0 || st.Failures != 0 || st.Rows != 12 {
		t.Errorf("stats %+v", st)
	}
	// The refused key never entered the window, but its message is held:
	// its replay is a duplicate of the open entry that holds it (it used
	// to be refused again and held under a second entry, each entry one
	// more release that could apply it once the row is out of the way).
	held := x.s.QuarantineBase() + ds[3].Position
	wantAgain := fmt.Sprintf("delivered again: held in quarantine as #%d, an open entry of the same key and content", held)
	if d := x.process(msgs[3])[0]; d.Outcome != engine.Duplicate || !strings.HasPrefix(d.Reason, wantAgain) {
		t.Errorf("the replay of the refused message: %v %q, want a duplicate of #%d", d.Outcome, d.Reason, held)
	}
}

func testReleaseRefused(t *testing.T, x *sqlSetup) {
	msg := reading("m1", 3, "0.5", `,"serial":"taken"`)
	first := x.process(msg, reading("m1", 4, "0.5", ""))[0]
	if first.Outcome != engine.Quarantined {
		t.Fatalf("%v %q", first.Outcome, first.Reason)
	}
	replay := x.process(msg)[0]
	qid := func(d engine.Decision) uint64 { return x.s.QuarantineBase() + d.Position }
	if replay.Outcome != engine.Duplicate || replay.Held != 0 || !strings.Contains(replay.Reason, fmt.Sprintf("held in quarantine as #%d,", qid(first))) {
		t.Fatalf("the replay: %v %q, held as #%d; want a duplicate of #%d, no entry of its own", replay.Outcome, replay.Reason, replay.Held, qid(first))
	}
	again, err := x.e.Release(t.Context(), qid(first), "op")
	wantReason := fmt.Sprintf("released from quarantine #%d: %s", qid(first), first.Reason)
	if err != nil || again.Outcome != engine.Quarantined || again.Reason != wantReason {
		t.Fatalf("release while the row is in the way: %v %q, %v; want quarantined %q", again.Outcome, again.Reason, err, wantReason)
	}
	x.run(`DELETE FROM {app}.readings WHERE msg_id = 'seed'`)
	applied, err := x.e.Release(t.Context(), qid(again), "op")
	if err != nil || applied.Outcome != engine.Applied {
		t.Fatalf("release after the row went: %v %q, %v", applied.Outcome, applied.Reason, err)
	}
	if d := x.process(msg)[0]; d.Outcome != engine.Duplicate {
		t.Fatalf("a delivery after the release: %v %q", d.Outcome, d.Reason)
	}
	if n := x.count(`SELECT count(*) FROM {app}.readings WHERE msg_id = 'm1-3'`); n != 1 {
		t.Fatalf("%d rows of the released message, want 1", n)
	}
	if n := x.count(`SELECT count(*) FROM ` + x.s.Schema() + `.quarantine`); n != 0 {
		t.Fatalf("%d quarantine entries left open", n)
	}
}

func testValues(t *testing.T, url string) {
	x := newSQLSetup(t, url, postgres.SQLAdaptive, `CREATE TABLE {app}.vals (
		k text, n numeric, b bigint, d double precision, t text, j jsonb, s text, f boolean, fj jsonb)`,
		engine.Route{Name: "vals", Topic: "v/+", Source: []string{"topic[1]"}, ID: "k", Effects: []engine.EffectSpec{{
			SQL:  "INSERT INTO {app}.vals (k, n, b, d, t, j, s, f, fj) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			Args: []string{"k", "num", "int", "num", "num", "num", "s", "flag", "flag"},
		}}})
	msg := func(p string) engine.Message { return engine.Message{Topic: "v/x", Payload: []byte(p)} }
	for _, d := range x.process(
		msg(`{"k":"a","num":0.1,"int":9007199254740993,"s":"h\u00e9llo \"x\"","flag":true}`),
		msg(`{"k":"b","num":1e3,"int":1e3,"s":"","flag":false}`),
		msg(`{"k":"c","num":12345678901234567890.123456789,"int":-9223372036854775808,"flag":null}`),
		msg(`{"k":"d","num":1.50,"int":null}`),
	) {
		if d.Outcome != engine.Applied {
			t.Fatalf("%v %q", d.Outcome, d.Reason)
		}
	}
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(t.Context(), x.sql(`SELECT k, n::text, b::text, d::text, t, j::text, s, f::text, fj::text FROM {app}.vals ORDER BY k`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		vs := make([]*string, 9)
		dst := make([]any, 9)
		for i := range vs {
			dst[i] = &vs[i]
		}
		if err := rows.Scan(dst...); err != nil {
			t.Fatal(err)
		}
		var line []string
		for _, v := range vs {
			if v == nil {
				line = append(line, "NULL")
			} else {
				line = append(line, *v)
			}
		}
		got = append(got, strings.Join(line, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// k | numeric | bigint | double precision | text | jsonb | string | boolean | boolean as jsonb
	want := []string{
		`a | 0.1 | 9007199254740993 | 0.1 | 0.1 | 0.1 | héllo "x" | true | true`,
		`b | 1000 | 1000 | 1000 | 1000 | 1000 |  | false | false`,
		`c | 12345678901234567890.123456789 | -9223372036854775808 | 1.2345678901234567e+19 | 12345678901234567890.123456789 | 12345678901234567890.123456789 | NULL | NULL | NULL`,
		`d | 1.5 | NULL | 1.5 | 1.5 | 1.5 | NULL | NULL | NULL`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func testStatementBroken(t *testing.T, url string) {
	// Parsing the statement casts the constant, before any message's
	// value is bound: a class 22 error that is the statement's, not the
	// message's.
	r := meterRoute()
	r.Effects[1] = engine.EffectSpec{SQL: "INSERT INTO {app}.readings (msg_id, meter, kwh) VALUES ($1, $2, 'x'::numeric)", Args: []string{"msgId", "topic[1]"}}
	x := newSQLSetup(t, url, postgres.SQLAdaptive, readingsDDL, r)
	_, err := x.e.Process(t.Context(), []engine.Message{reading("m1", 1, "0.5", "")})
	if err == nil || !strings.Contains(err.Error(), "SQLSTATE 22P02") {
		t.Fatalf("Process = %v, want the statement's error", err)
	}
	if n := x.count(`SELECT count(*) FROM ` + x.s.Schema() + `.audit`); n != 0 {
		t.Fatalf("%d audit records written by a failed batch", n)
	}
}

// testUnpreparedNamed runs a route whose second sql effect names a
// column its table lacks: the server refuses to prepare it, and the
// batch's error names that effect, so that an operator with several
// statements knows which one to fix.
func testUnpreparedNamed(t *testing.T, url string, mode postgres.SQLMode) {
	r := meterRoute()
	r.Effects = append(r.Effects, engine.EffectSpec{SQL: "UPDATE {app}.readings SET no_such_column = $1 WHERE msg_id = $2", Args: []string{"kwh", "msgId"}})
	x := newSQLSetup(t, url, mode, readingsDDL, r)
	_, err := x.e.Process(t.Context(), []engine.Message{reading("m1", 1, "0.5", "")})
	if err == nil || !strings.Contains(err.Error(), `route "meters" effects[2]`) || !strings.Contains(err.Error(), "SQLSTATE 42703") {
		t.Fatalf("Process = %v, want the error to name route \"meters\" effects[2] and SQLSTATE 42703", err)
	}
}

// TestSQLServerKilled kills the server while a batch's statement waits
// for a row lock: nothing is committed, Process fails, and the same batch
// is applied once the server is back.
func TestSQLServerKilled(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLSetup(t, pg.URL(), postgres.SQLAdaptive, readingsDDL, meterRoute())
	hold, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(context.Background())
	// An uncommitted row with serial "held": the batch's insert of the
	// same serial waits for this transaction.
	if _, err := hold.Exec(t.Context(), x.sql(`BEGIN; INSERT INTO {app}.readings (msg_id, meter, serial) VALUES ('hold', 'm9', 'held')`)); err != nil {
		t.Fatal(err)
	}
	var msgs []engine.Message
	for i := range 5 {
		extra := ""
		if i == 2 {
			extra = `,"serial":"held"`
		}
		msgs = append(msgs, reading("m1", i, "0.5", extra))
	}
	done := make(chan error, 1)
	go func() {
		_, err := x.e.Process(t.Context(), msgs)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if x.count(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited for the held row")
		}
	}
	pg.Kill()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "the transaction was not committed") {
		t.Fatalf("Process with the server killed = %v", err)
	}
	t.Logf("with the server killed: %v", err)
	pg.Restart()
	for table, want := range map[string]int64{
		x.s.Schema() + ".audit": 0, x.s.Schema() + ".keys": 0, x.s.Schema() + ".quarantine": 0, "{app}.readings": 1,
	} {
		if n := x.count(`SELECT count(*) FROM ` + table); n != want {
			t.Errorf("%s: %d rows after the kill, want %d", table, n, want)
		}
	}
	for i, d := range x.process(msgs...) {
		if d.Outcome != engine.Applied {
			t.Errorf("message %d after the restart: %v %q", i, d.Outcome, d.Reason)
		}
	}
	if n := x.count(`SELECT count(*) FROM {app}.readings WHERE meter = 'm1'`); n != 5 {
		t.Fatalf("%d readings after the restart, want 5", n)
	}
}

// TestSQLPreparedOnce reads the server's statement log: each connection
// parses the user's statement once and executes it for every message.
func TestSQLPreparedOnce(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{"log_min_duration_statement=0"}})
	x := newSQLSetup(t, pg.URL(), postgres.SQLAdaptive, readingsDDL, meterRoute())
	const batches, size = 6, 20
	for b := range batches {
		var msgs []engine.Message
		for i := range size {
			msgs = append(msgs, reading("m1", b*size+i, "0.5", ""))
		}
		x.process(msgs...)
	}
	// "2026-01-01 00:00:00.000 UTC [pid] LOG:  duration: 0.012 ms  parse stmtcache_…: INSERT INTO …readings …"
	line := regexp.MustCompile(`\[(\d+)\] LOG:  duration: \S+ ms  (parse|execute) \S+: INSERT INTO ` + x.app + `\.readings`)
	// The server's log reaches the test through a pipe: read it until the
	// last batch's lines have arrived (or a deadline passed), then check.
	var parses, executes map[string]int
	total := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		parses, executes, total = map[string]int{}, map[string]int{}, 0
		for _, l := range strings.Split(pg.Log(), "\n") {
			if m := line.FindStringSubmatch(l); m != nil {
				map[string]map[string]int{"parse": parses, "execute": executes}[m[2]][m[1]]++
			}
		}
		for _, n := range executes {
			total += n
		}
		if total >= batches*size || time.Now().After(deadline) {
			break
		}
	}
	for pid, n := range executes {
		if parses[pid] != 1 {
			t.Errorf("connection %s parsed the statement %d times for %d executions", pid, parses[pid], n)
		}
	}
	if total != batches*size || len(parses) != len(executes) {
		t.Fatalf("executions %v (%d, want %d), parses %v", executes, total, batches*size, parses)
	}
	t.Logf("%d executions on %d connections, one parse each", total, len(executes))
}

func TestExecAndSimpleQueryModesAreRefused(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		_, err := postgres.Open(context.Background(), postgres.Options{URL: "postgres://u@127.0.0.1:1/db?default_query_exec_mode=" + mode, Member: "m1"})
		if err == nil || !strings.Contains(err.Error(), "default_query_exec_mode="+mode) {
			t.Errorf("Open = %v, want %s mode refused by name", err, mode)
		}
	}
}

// TestAPoolOfOneConnectionIsRefused: a batch's transaction holds a
// connection while its decide looks a held entry up on another; with a
// pool of one, every batch holding a message delivered again would wait
// for itself until store.commit_timeout, and fail again when retried.
func TestAPoolOfOneConnectionIsRefused(t *testing.T) {
	_, err := postgres.Open(context.Background(), postgres.Options{URL: "postgres://u@127.0.0.1:1/db?pool_max_conns=1", Member: "m1"})
	if err == nil || !strings.Contains(err.Error(), "pool_max_conns=1") || !strings.Contains(err.Error(), "at least 2") {
		t.Errorf("Open = %v, want pool_max_conns=1 refused by name", err)
	}
	if err := postgres.CheckURL("postgres://u@127.0.0.1:1/db?pool_max_conns=2"); err != nil {
		t.Errorf("CheckURL(pool_max_conns=2) = %v, want nil", err)
	}
}

// TestAStatementThatEndsTheTransactionIsRefused: a sql effect runs in the
// decision's transaction, after the batch's keys are written. A statement
// that controls that transaction (ROLLBACK, COMMIT, END, BEGIN, a
// savepoint) would leave the statements after it, the audit records and
// the window to run outside it or undo the store's own savepoint:
// with ROLLBACK first, the message's keys and audit record are rolled back
// while the user's row behind it stays, so every replay applies it again.
// Such a route is refused when the engine is built, on a real server.
func TestAStatementThatEndsTheTransactionIsRefused(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	for _, stmt := range []string{"ROLLBACK", "commit", " /* done */ END", "-- done\nCOMMIT AND CHAIN", "Begin",
		"START TRANSACTION", "abort", "COMMIT/* now */", "SAVEPOINT s", "RELEASE SAVEPOINT replayguard_sql", "PREPARE TRANSACTION 'x'"} {
		t.Run(stmt, func(t *testing.T) {
			g := newGroup(t, pg.URL())
			app := g.schema + "_app"
			run(t, pg.URL(), "CREATE SCHEMA "+app+"; CREATE TABLE "+app+".tally (meter text, n int)")
			s := g.mustOpen("m1")
			r := engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
				Effects: []engine.EffectSpec{
					{SQL: stmt},
					{SQL: "INSERT INTO " + app + ".tally VALUES ($1, 1)", Args: []string{"topic[1]"}},
				}}
			e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{r}})
			if err == nil {
				e.Close()
				t.Fatalf("New accepted a route whose statement %q ends the decision's transaction", stmt)
			}
			if !errors.Is(err, engine.ErrConfig) || !strings.Contains(err.Error(), "transaction") {
				t.Fatalf("New = %v, want a config error saying the statement controls the transaction", err)
			}
		})
	}
}
