package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestSQLEffectStringKeepsItsMeaningInJSONB: "values keep their meaning"
// and "a string goes in as text". A JSON string bound to a jsonb parameter
// must arrive as a JSON string: not parsed as JSON text, which turns the
// producer's string "{\"role\":\"admin\"}" into an object, "123" into a
// number, "null" into JSON null, and refuses (quarantines) a plain word.
func TestSQLEffectStringKeepsItsMeaningInJSONB(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLSetup(t, pg.URL(), postgres.SQLAdaptive, `CREATE TABLE {app}.notes (k text, j jsonb)`,
		engine.Route{Name: "notes", Topic: "n/+", Source: []string{"topic[1]"}, ID: "k", Effects: []engine.EffectSpec{{
			SQL: "INSERT INTO {app}.notes (k, j) VALUES ($1, $2)", Args: []string{"k", "s"}}}})
	msg := func(p string) engine.Message { return engine.Message{Topic: "n/x", Payload: []byte(p)} }
	ds := x.process(msg(`{"k":"a","s":"{\"role\":\"admin\"}"}`), msg(`{"k":"b","s":"123"}`), msg(`{"k":"c","s":"hello"}`))
	for i, d := range ds {
		if d.Outcome != engine.Applied {
			t.Errorf("message %d: %v %q, want applied", i, d.Outcome, d.Reason)
		}
	}
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(t.Context(), x.sql(`SELECT k, jsonb_typeof(j), j::text FROM {app}.notes ORDER BY k`))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, typ, j string
		if err := rows.Scan(&k, &typ, &j); err != nil {
			t.Fatal(err)
		}
		if typ != "string" {
			t.Errorf("message %s: the string arrived as a JSON %s: %s", k, typ, j)
		}
	}
}

// TestSQLEffectStringsStillReachOtherTypesAsText: a string bound to a
// parameter of another type is read by that type's input function, as
// before.
func TestSQLEffectStringsStillReachOtherTypesAsText(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLSetup(t, pg.URL(), postgres.SQLAdaptive, `CREATE TYPE {app}.mood AS ENUM ('ok', 'sad');
		CREATE TABLE {app}.typed (k text, b bigint, n numeric, f boolean, ts timestamptz, u uuid, m {app}.mood, v varchar(8), a text[], j json)`,
		engine.Route{Name: "typed", Topic: "n/+", Source: []string{"topic[1]"}, ID: "k", Effects: []engine.EffectSpec{{
			SQL:  "INSERT INTO {app}.typed (k, b, n, f, ts, u, m, v, a, j) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
			Args: []string{"k", "b", "n", "f", "ts", "u", "m", "v", "a", "j"}}}})
	ds := x.process(engine.Message{Topic: "n/x", Payload: []byte(`{"k":"a","b":"42","n":"0.10","f":"true",` +
		`"ts":"2026-01-02T03:04:05Z","u":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","m":"sad","v":"short","a":"{x,y}","j":"s"}`)})
	if ds[0].Outcome != engine.Applied {
		t.Fatalf("%v %q", ds[0].Outcome, ds[0].Reason)
	}
	got := ""
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	err = c.QueryRow(t.Context(), x.sql(`SELECT concat_ws(' | ', b, n, f, ts AT TIME ZONE 'UTC', u, m, v, a, j) FROM {app}.typed`)).Scan(&got)
	if want := `42 | 0.10 | t | 2026-01-02 03:04:05 | 6ba7b810-9dad-11d1-80b4-00c04fd430c8 | sad | short | {x,y} | "s"`; err != nil || got != want {
		t.Fatalf("row %q, %v; want %q", got, err, want)
	}
}
