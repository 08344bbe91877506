package postgres

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestMigrationsAreNumberedAndTemplated(t *testing.T) {
	if len(migrations) != schemaVersion || schemaVersion < 2 {
		t.Fatalf("%d migrations, schema version %d", len(migrations), schemaVersion)
	}
	for i, m := range migrations {
		if m.version != i+1 {
			t.Errorf("migration %s has version %d at place %d", m.name, m.version, i+1)
		}
		if !strings.Contains(m.sql, templateSchema) || strings.Contains(m.sql, "{s}") {
			t.Errorf("migration %s names its tables without %s", m.name, templateSchema)
		}
		if got := m.in(`"x"`); strings.Contains(got, "TEMPLATE") || !strings.Contains(got, `"x".`) {
			t.Errorf("migration %s in schema x:\n%s", m.name, got)
		}
	}
}

func TestLoadMigrationsRefusesGaps(t *testing.T) {
	file := &fstest.MapFile{Data: []byte("SELECT 1")}
	for name, fsys := range map[string]fstest.MapFS{
		"a gap":           {"m/001_a.up.sql": file, "m/003_c.up.sql": file},
		"not from 1":      {"m/002_b.up.sql": file},
		"two digits":      {"m/01_a.up.sql": file},
		"no name":         {"m/001.up.sql": file},
		"no migrations":   {"m/README": file},
		"a repeated step": {"m/001_a.up.sql": file, "m/001_b.up.sql": file},
	} {
		if ms, err := loadMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: loaded %d migrations, want an error", name, len(ms))
		}
	}
	ms, err := loadMigrations(fstest.MapFS{"m/002_b.up.sql": file, "m/001_a.up.sql": file, "m/notes.txt": file}, "m")
	if err != nil || len(ms) != 2 || ms[0].name != "001_a.up.sql" || ms[1].version != 2 {
		t.Fatalf("loadMigrations = %+v, %v", ms, err)
	}
}
