package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/postgres"
)

// createWithGoStrings creates g's schema with the DDL replayguard ran
// before its migrations were embedded .sql files, at version 2.
func createWithGoStrings(t *testing.T, g *group) {
	t.Helper()
	ddl, err := os.ReadFile("testdata/schema_v2_go_strings.sql")
	if err != nil {
		t.Fatal(err)
	}
	run(t, g.url, strings.ReplaceAll(string(ddl), "{s}", pgx.Identifier{g.schema}.Sanitize()))
}

func testSchemaGoStrings(t *testing.T, g *group) {
	createWithGoStrings(t, g)
	recs := records("m1", 1, 2)
	for round := range 2 { // opened (and migrated), closed and opened again
		s := g.mustOpen("m1")
		if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != int64(postgres.SchemaVersion) {
			t.Fatalf("open %d: schema version %d, want %d: the schema was not migrated", round, n, postgres.SchemaVersion)
		}
		e := engine.OutboxEntry{ID: engine.OutboxID(uint64(round+1), 0), Output: engine.OutputMQTT, Target: "clean/x", Route: "meters",
			Topic: "plant/m1/energy", Key: recs[round].Key, Sequence: -1, Time: recs[round].Time, Payload: []byte(`{"kwh":1}`)}
		if err := s.Commit(t.Context(), &engine.Batch{Audit: recs[round : round+1], Outbox: []engine.OutboxEntry{e}}); err != nil {
			t.Fatalf("open %d: Commit: %v", round, err)
		}
		if h, err := s.Head(t.Context()); err != nil || h.Position != uint64(round+1) {
			t.Fatalf("open %d: head %+v, %v", round, h, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ro, err := g.open("")
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	if es, err := ro.Outbox(t.Context(), "m1", 0, 10); err != nil || len(es) != 2 {
		t.Fatalf("outbox = %d entries, %v; want 2", len(es), err)
	}
	// The chain written before the migration is trimmed like a new one,
	// and keeps its head.
	s := g.mustOpen("m1")
	base := engine.AuditHead{Position: 1, Hash: recs[0].Hash}
	if err := s.TrimChain(t.Context(), "m1", 2, base); err != nil {
		t.Fatalf("TrimChain on the migrated schema: %v", err)
	}
	if b, err := ro.ChainBase(t.Context(), "m1"); err != nil || b != base {
		t.Fatalf("ChainBase = %+v, %v; want %+v", b, err, base)
	}
	if h, err := s.Head(t.Context()); err != nil || h != (engine.AuditHead{Position: 2, Hash: recs[1].Hash}) {
		t.Fatalf("head after the trim = %+v, %v", h, err)
	}
}

// testSchemaNotMigratedUnderARunningMember leaves a schema of version 2
// with a member of that build holding its lease: a member of this build
// refuses to migrate it, naming that member and what to do, and leaves it
// at version 2 for the running member; once that lease is given up, or
// has run out, the schema is migrated.
func testSchemaNotMigratedUnderARunningMember(t *testing.T, g *group) {
	createWithGoStrings(t, g)
	run(t, g.url, `INSERT INTO `+g.schema+`.members (member, holder, lease_expires)
		VALUES ('old-1', 'otherhost 4242 cafe', clock_timestamp() + interval '1 hour'),
		       ('old-2', '', clock_timestamp() + interval '1 hour'),
		       ('old-3', 'otherhost 4243 cafe', clock_timestamp() - interval '1 second')`)
	_, err := g.open("m1")
	if !errors.Is(err, postgres.ErrMembersRunning) {
		t.Fatalf("open under a running member of version 2 = %v, want ErrMembersRunning", err)
	}
	for _, want := range []string{`version 2`, `member "old-1"`, "stop every member"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "old-2") || strings.Contains(err.Error(), "old-3") {
		t.Errorf("error %q names a member whose lease was given up or ran out", err)
	}
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != 2 {
		t.Fatalf("schema version %d after a refused open, want 2", n)
	}
	run(t, g.url, `UPDATE `+g.schema+`.members SET holder = '', lease_expires = '-infinity' WHERE member = 'old-1'`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("schema version %d once the member stopped, want %d", n, postgres.SchemaVersion)
	}
}

// testSchemaOlderReadOnly opens a schema of version 2 without a member id,
// as the read commands do: refused, leaving the schema as it is, with words
// that say what an operator can do.
func testSchemaOlderReadOnly(t *testing.T, g *group) {
	createWithGoStrings(t, g)
	_, err := g.open("")
	for _, want := range []string{"version 2, older than this build's", "read it with the build that wrote it", "start this build's (replayguard run)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("read-only open of a version 2 schema = %v; want it to say %q", err, want)
		}
	}
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != 2 {
		t.Fatalf("schema version %d after a read-only open, want 2", n)
	}
}

func testSchemaSameCatalog(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	old := newGroup(t, g.url)
	createWithGoStrings(t, old)
	old.mustOpen("m1").Close() // migrated from version 2
	got, want := catalog(t, g.url, g.schema), catalog(t, g.url, old.schema)
	if !slices.Equal(got, want) {
		t.Fatalf("the migrations made:\n%s\nthe Go-string DDL and the migrations after it made:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(got) < 30 {
		t.Fatalf("the catalog of the schema lists %d lines:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// catalog describes schema's columns, constraints and indexes, without
// naming the schema.
func catalog(t *testing.T, url, schema string) []string {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(t.Context(), `
		SELECT format('column %s.%s #%s %s collation=%s null=%s default=%s identity=%s %s', table_name, column_name,
			ordinal_position, data_type, coalesce(collation_name, '-'), is_nullable, coalesce(column_default, '-'),
			is_identity, coalesce(identity_generation, '-'))
		FROM information_schema.columns WHERE table_schema = $1
		UNION ALL
		SELECT format('constraint %s.%s %s', t.relname, k.conname, pg_get_constraintdef(k.oid))
		FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = $1
		UNION ALL
		SELECT format('index %s', replace(indexdef, quote_ident(schemaname) || '.', ''))
		FROM pg_indexes WHERE schemaname = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// testSchemaJSONRows writes the rows of a source and an entity as a schema
// of version 3 held them (JSON), and checks that a member migrates the
// schema, reads them on Load and in Update, and writes them back binary.
func testSchemaJSONRows(t *testing.T, g *group) {
	src := source(7)
	ent := engine.EntityState{Name: "incident/7", Fields: engine.Fields{
		{Name: "casualties", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: "3", Version: engine.Version{Epoch: 1, Sequence: 7, Ordinal: 7}}}}}
	g.mustOpen("m1").Close()
	sj, _ := json.Marshal(&src)
	ej, _ := json.Marshal(&ent)
	run(t, g.url, `INSERT INTO `+g.schema+`.sources (id, state) VALUES ($1, $2)`, []byte(src.ID()), sj)
	run(t, g.url, `INSERT INTO `+g.schema+`.entities (name, state) VALUES ($1, $2)`, []byte(ent.Name), ej)
	run(t, g.url, `UPDATE `+g.schema+`.schema_version SET version = 3`)
	leasesInMembers(t, g)

	s := g.mustOpen("m1")
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("schema version %d, want %d", n, postgres.SchemaVersion)
	}
	snap, err := s.Load(t.Context())
	if err != nil || len(snap.Sources) != 1 || len(snap.Entities) != 1 ||
		!reflect.DeepEqual(snap.Sources[0], src) || !reflect.DeepEqual(snap.Entities[0], ent) {
		t.Fatalf("Load of JSON rows = %+v, %v; want %+v and %+v", snap, err, src, ent)
	}
	r := &engine.Reads{Sources: []string{src.ID()}, Entities: []string{ent.Name}}
	err = s.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
		if len(rows.Sources) != 1 || !reflect.DeepEqual(rows.Sources[0], src) || len(rows.Entities) != 1 || !reflect.DeepEqual(rows.Entities[0], ent) {
			t.Errorf("Update read %+v, want the JSON rows", rows)
		}
		next := source(8)
		return &engine.Batch{Sources: []engine.SourceState{next}, Entities: []engine.EntityState{ent}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for table, format := range map[string]string{"sources": "3", "entities": "4"} {
		if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.`+table+` WHERE get_byte(state, 0) = `+format); n != 1 {
			t.Errorf("%s: %d binary rows of format %s after the write, want 1", table, n, format)
		}
	}
	if snap, err := s.Load(t.Context()); err != nil || snap.Sources[0].Epochs[0].High != 8 || !reflect.DeepEqual(snap.Entities[0], ent) {
		t.Fatalf("Load of the rows written binary = %+v, %v", snap, err)
	}
}
