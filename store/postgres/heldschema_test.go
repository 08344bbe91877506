package postgres_test

import (
	"testing"

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
