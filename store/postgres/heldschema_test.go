package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/postgres"
)

// testSchemaRaisedForUniqueHeld: a schema of version 16 may hold two open
// entries of one key and content, which two members opened at once; a
// member of this build raises it to 17, leaving the held value on the
// lowest id only, and making it unique among the open entries.
func testSchemaRaisedForUniqueHeld(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	q := g.schema + `.quarantine`
	run(t, g.url, `DROP INDEX `+g.schema+`.quarantine_held;
		CREATE INDEX quarantine_held ON `+q+` (held, id) WHERE held IS NOT NULL;
		INSERT INTO `+q+` (id, entry, payload, held) VALUES
			(7, '{}', '', decode(repeat('ab', 64), 'hex')), (5, '{}', '', decode(repeat('ab', 64), 'hex')),
			(9, '{}', '', decode(repeat('cd', 64), 'hex')), (11, '{}', '', NULL);
		UPDATE `+g.schema+`.schema_version SET version = 16`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version >= 17`); n != 1 {
		t.Fatalf("a member left the schema below version 17 (build version %d)", postgres.SchemaVersion)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+q+` WHERE held IS NOT NULL AND id IN (5, 9)`); n != 2 {
		t.Errorf("%d of entries 5 and 9 keep their held value, want both", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+q+` WHERE held IS NULL AND id IN (7, 11)`); n != 2 {
		t.Errorf("%d of entries 7 and 11 have no held value, want both: 7 shares 5's", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'quarantine_held'
		AND indexdef LIKE 'CREATE UNIQUE INDEX%' AND indexdef LIKE '%WHERE (held IS NOT NULL)%'`, g.schema); n != 1 {
		t.Fatalf("%d partial unique indexes quarantine_held after the raise, want 1", n)
	}
}

// heldRoutes is a route of meter readings by id, for the entries held
// before version 15.
var heldRoutes = []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}

// m1Reading is a reading of meter m1.
func m1Reading(kwh string) engine.Message {
	return engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":` + kwh + `}`)}
}

// holdConflict has an engine on s apply a reading and hold another of
// the same id, and returns the entry that holds it.
func holdConflict(t *testing.T, s *postgres.Store) uint64 {
	t.Helper()
	e, err := engine.New(t.Context(), s, engine.Options{Routes: heldRoutes})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ds, err := e.Process(t.Context(), []engine.Message{m1Reading("1"), m1Reading("5")})
	if err != nil || ds[1].Outcome != engine.Conflict || ds[1].Held == 0 {
		t.Fatalf("the second reading: %+v, %v; want a conflict held", ds, err)
	}
	return ds[1].Held
}

// testSchemaBackfillsHeld: an entry held before version 15 (no held
// value) is given one when the schema is raised to 18: its message
// delivered again is a duplicate of it, and opens no second entry.
func testSchemaBackfillsHeld(t *testing.T, g *group) {
	s := g.mustOpen("m1")
	id := holdConflict(t, s)
	s.Close()
	run(t, g.url, `UPDATE `+g.schema+`.quarantine SET held = NULL; UPDATE `+g.schema+`.schema_version SET version = 17`)
	s = g.mustOpen("m1")
	e, err := engine.New(t.Context(), s, engine.Options{Routes: heldRoutes})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ds, err := e.Process(t.Context(), []engine.Message{m1Reading("5")})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("delivered again: held in quarantine as #%d,", id)
	if ds[0].Outcome != engine.Duplicate || !strings.HasPrefix(ds[0].Reason, want) {
		t.Errorf("the conflict delivered again after the raise: %s (%s), want a duplicate naming #%d", ds[0].Outcome, ds[0].Reason, id)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.quarantine`); n != 1 {
		t.Errorf("%d quarantine entries, want 1", n)
	}
}

// testSchemaBackfillsHeldAsTheEngine: the held value the raise to 18
// computes is, byte for byte, the one a member writes (the key, then
// engine.HeldContent), for topics and payloads of every kind; an entry
// whose key and content another open entry holds keeps none, and of two
// without one, the lower id is given it.
func testSchemaBackfillsHeldAsTheEngine(t *testing.T, g *group) {
	s := g.mustOpen("m1")
	key := func(b byte) engine.Hash { return engine.Hash{b, 1, 2, 3} }
	base := s.QuarantineBase()
	old := []engine.QuarantineEntry{ // as a build before version 15 wrote them: no Content
		{Topic: "plant/m1/energy", Key: key(1).String(), Payload: []byte(`{"msgId":"r-1","kwh":5}`)},
		{Topic: "plant/Zürich/énergie ☃", Key: key(2).String(), Payload: []byte{0, 0xff, 0xfe, '"', '\\', 0}},
		{Topic: `a<b>&"c"\d` + "\t\u2028", Key: key(3).String(), Payload: nil},
		{Topic: "", Key: key(4).String(), Payload: []byte("x")},
		{Topic: "plant/m1/energy", Key: key(1).String(), Payload: []byte(`{"msgId":"r-1","kwh":5}`)}, // the first again
		{Topic: "plant/m9/energy", Key: key(5).String(), Payload: []byte("indexed below")},
		{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":`)}, // malformed: no key
	}
	for i := range old {
		old[i].ID, old[i].Outcome, old[i].Time = base+uint64(i)+1, "conflict", time.Unix(1_700_000_000, 0).UTC()
	}
	indexed := old[5] // an entry of this build holding the same message as old[5]
	indexed.ID, indexed.Content = base+100, engine.HeldContent(indexed.Topic, indexed.Payload)
	if err := s.Commit(t.Context(), &engine.Batch{Quarantine: append(slices.Clone(old), indexed)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	run(t, g.url, `UPDATE `+g.schema+`.schema_version SET version = 17`)
	g.mustOpen("m1").Close()
	for i, q := range old {
		want := []byte(nil)
		if i < 4 {
			k := key(byte(i + 1))
			c := engine.HeldContent(q.Topic, q.Payload)
			want = append(k[:], c[:]...)
		}
		var got []byte
		row(t, g.url, `SELECT held FROM `+g.schema+`.quarantine WHERE id = $1`, &got, int64(q.ID))
		if !bytes.Equal(got, want) {
			t.Errorf("entry %d (topic %q): held %x, want %x", i, q.Topic, got, want)
		}
	}
}

// row scans the one value sql returns into dst.
func row(t *testing.T, url, sql string, dst any, args ...any) {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	if err := c.QueryRow(t.Context(), sql, args...).Scan(dst); err != nil {
		t.Fatal(err)
	}
}

// testSchemaBackfillsHeldInALatin1Database: in a database whose encoding
// is not UTF8, the raise to 18 leaves the entries held before version 15
// unindexed, as they were, instead of failing on a topic the database's
// encoding cannot hold, which would keep every member of this build from
// opening the schema.
func testSchemaBackfillsHeldInALatin1Database(t *testing.T, g *group) {
	u, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	db := g.schema + "_latin1"
	run(t, g.url, `CREATE DATABASE `+db+` ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`)
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), g.url); err == nil {
			c.Exec(context.Background(), `DROP DATABASE `+db+` WITH (FORCE)`)
			c.Close(context.Background())
		}
	})
	u.Path = "/" + db
	lg := &group{t: t, url: u.String(), schema: g.schema}
	s := lg.mustOpen("m1")
	old := engine.QuarantineEntry{ID: s.QuarantineBase() + 1, Outcome: "conflict", Time: time.Unix(1_700_000_000, 0).UTC(),
		Topic: "plant/☃/energy", Key: engine.Hash{1}.String(), Payload: []byte(`{"msgId":"r-1","kwh":5}`)}
	if err := s.Commit(t.Context(), &engine.Batch{Quarantine: []engine.QuarantineEntry{old}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	run(t, lg.url, `UPDATE `+lg.schema+`.schema_version SET version = 17`)
	s, err = lg.open("m1")
	if err != nil {
		t.Fatalf("the raise to 18 in a LATIN1 database: %v", err)
	}
	s.Close()
	var held []byte
	row(t, lg.url, `SELECT held FROM `+lg.schema+`.quarantine WHERE id = $1`, &held, int64(old.ID))
	if held != nil {
		t.Errorf("the entry's held value %x, want none in a database that is not UTF8", held)
	}
}
