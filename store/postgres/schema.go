package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayguard/replayguard/store/internal/shared"
)

// The schema's layout is the numbered migrations in migrations/, as River
// keeps its own: NNN_name.up.sql takes a schema from version NNN-1 to NNN,
// and a schema's version is the one row of its schema_version table. In a
// migration, templateSchema stands before every table name and is replaced
// with the quoted schema and a dot; left as it is, a comment, the file runs
// in the search_path's schema.
//
//go:embed migrations/*.up.sql
var migrationFiles embed.FS

const templateSchema = "/* TEMPLATE: schema */"

// migration is one numbered step of the schema.
type migration struct {
	version int
	name    string // the file name
	sql     string
}

// migrations are every step, by version from 1.
var migrations = mustMigrations(loadMigrations(migrationFiles, "migrations"))

// schemaVersion is the newest layout this build knows: the number of
// migrations. Open refuses a schema written by a newer build.
var schemaVersion = len(migrations)

// loadMigrations reads the NNN_name.up.sql files of dir, which must be
// numbered 1, 2, … without a gap.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.up.sql"))
	if err != nil {
		return nil, err
	}
	out := make([]migration, 0, len(names))
	for i, name := range names { // Glob sorts them
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 3 || v != i+1 {
			return nil, fmt.Errorf("postgres store: migration %s: want %03d_name.up.sql", base, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("postgres store: no migrations in %s", dir)
	}
	return out, nil
}

func mustMigrations(ms []migration, err error) []migration {
	if err != nil {
		panic(err)
	}
	return ms
}

// in returns the migration's SQL for the schema s (quoted).
func (m migration) in(s string) string {
	return strings.ReplaceAll(m.sql, templateSchema, s+".")
}

// migrate creates the schema or brings it to schemaVersion, in one
// transaction under an advisory lock, so that members starting at once
// wait for each other and the second finds the work done. A read-only
// handle only checks the version. It refuses to migrate while a member
// holds its lease: that member runs an earlier build, which would go on
// deciding on tables and rows it no longer reads right. A member of this
// build takes its lease under the same lock, shared (checkVersionLocked),
// so a later build's migration either sees that lease or is seen by the
// member, which then refuses. A migration clears every holder whose lease
// it found given up or run out: a member of an earlier build stalled past
// its lease, which would renew it and go on, finds it lost instead.
//
// The transaction reads committed rows, whatever the server's or the
// URL's default_transaction_isolation: a snapshot taken while the lock
// is waited for would not see the migration of the member that held it,
// and a second member starting at once would run it again (and fail).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, readOnly bool) error {
	s := pgx.Identifier{schema}.Sanitize()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if !readOnly {
		if err := createVersionTable(ctx, tx, schema, s); err != nil {
			return err
		}
	}
	v, err := readVersion(ctx, tx, schema, s)
	if err != nil {
		return err
	}
	given := false
	if !readOnly && v >= 11 {
		if given, err = giveLeasesShare(ctx, tx, schema, s); err != nil {
			return err
		}
	}
	switch {
	case v > schemaVersion:
		return fmt.Errorf("schema %q has version %d, newer than this build knows (%d): upgrade replayguard", schema, v, schemaVersion)
	case v == schemaVersion && given:
		return tx.Commit(ctx)
	case v == schemaVersion:
		return nil
	case readOnly:
		return fmt.Errorf("schema %q has version %d, older than this build's %d, which only a member migrates: "+
			"read it with the build that wrote it, or stop that build's members and start this build's (replayguard run)", schema, v, schemaVersion)
	}
	if v > 0 {
		if err := refuseLiveMembers(ctx, tx, schema, s, v); err != nil {
			return err
		}
	}
	for _, m := range migrations[v:] {
		if _, err := tx.Exec(ctx, m.in(s)); err != nil {
			return fmt.Errorf("migrate schema %q to version %d (%s): %w", schema, m.version, m.name, err)
		}
	}
	if v > 0 {
		if _, err := tx.Exec(ctx, `UPDATE `+s+`.members SET holder = '' WHERE holder <> ''`); err != nil {
			return fmt.Errorf("clear the leases that ran out, migrating schema %q: %w", schema, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s+`.schema_version SET version = $1`, schemaVersion); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// giveLeasesShare adds the leases' share column to a schema of version 11
// or later that lacks it. Version 11 was first written without it, by the
// builds that recorded the routes' key derivations before a member that
// stops left its share group; every lease this build takes sets it. Those
// builds never read the column, so adding it leaves their members right.
// Called under the migration lock; a schema that has it is only read. It
// reports whether it added the column, which the caller commits.
func giveLeasesShare(ctx context.Context, tx pgx.Tx, schema, s string) (bool, error) {
	var has bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'leases' AND column_name = 'share')`, schema).Scan(&has)
	if err != nil || has {
		return false, err
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE `+s+`.leases ADD COLUMN IF NOT EXISTS share text COLLATE "C" NOT NULL DEFAULT ''`); err != nil {
		return false, fmt.Errorf("give the leases of schema %q their share column: %w", schema, err)
	}
	return true, nil
}

// migrationLock is the advisory lock a migration holds, and a member
// taking its lease holds shared.
const migrationLock = `hashtext('replayguard migrate ' || $1)`

// checkVersionLocked takes the migration lock shared for tx and fails
// unless the schema is still at schemaVersion: a later build may have
// migrated it since migrate read it. Held until tx ends, the lock keeps
// such a migration waiting until the member's lease is committed, which
// the migration then sees.
func checkVersionLocked(ctx context.Context, tx pgx.Tx, schema string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+migrationLock+`)`, schema); err != nil {
		return err
	}
	s := pgx.Identifier{schema}.Sanitize()
	v, err := readVersion(ctx, tx, schema, s)
	if err != nil {
		return err
	}
	if v != schemaVersion {
		return fmt.Errorf("schema %q has version %d since this member checked it, not this build's %d: a member of another build migrated it meanwhile; "+
			"run the build that wrote it", schema, v, schemaVersion)
	}
	return nil
}

// refuseLiveMembers fails, naming them, when members hold a lease in a
// schema of version v, the opening member's own included: its holder is
// another process, which this one could not take the lease from either.
// Until version 8 the lease's expiry was a column of members; a released
// lease has no holder, and one whose process died on this host holds
// nothing.
func refuseLiveMembers(ctx context.Context, tx pgx.Tx, schema, s string, v int) error {
	q := `SELECT m.member, m.holder FROM ` + s + `.members m JOIN ` + s + `.leases l USING (member)
		WHERE m.holder <> '' AND l.expires > clock_timestamp() ORDER BY m.member`
	if v < 8 {
		q = `SELECT member, holder FROM ` + s + `.members
		WHERE holder <> '' AND lease_expires > clock_timestamp() ORDER BY member`
	}
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("read the members' leases before migrating schema %q: %w", schema, err)
	}
	var live []string
	var id, holder string
	_, err = pgx.ForEachRow(rows, []any{&id, &holder}, func() error {
		if !shared.DeadHere(holder) { // a member killed on this host holds nothing
			live = append(live, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the members' leases before migrating schema %q: %w", schema, err)
	}
	if len(live) > 0 {
		return fmt.Errorf("%w: schema %q has version %d, and %s of an earlier build still running: "+
			"stop every member of the group, then start this build's to migrate it to version %d "+
			"(a killed member holds its lease until it runs out, %s by default)",
			ErrMembersRunning, schema, v, shared.NamedMembers(live), schemaVersion, DefaultLeaseTTL)
	}
	return nil
}

// createVersionTable takes the migration lock and creates the schema and
// its version table at version 0 when they are missing.
func createVersionTable(ctx context.Context, tx pgx.Tx, schema, s string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+migrationLock+`)`, schema); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s+`;
		CREATE TABLE IF NOT EXISTS `+s+`.schema_version (
			one     boolean PRIMARY KEY DEFAULT true CHECK (one),
			version integer NOT NULL
		);
		INSERT INTO `+s+`.schema_version (version) VALUES (0) ON CONFLICT DO NOTHING`)
	return err
}

// readVersion returns the schema's version.
func readVersion(ctx context.Context, tx pgx.Tx, schema, s string) (int, error) {
	var v int
	err := tx.QueryRow(ctx, `SELECT version FROM `+s+`.schema_version`).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return 0, fmt.Errorf("schema %q %w (open it with a member id once to create it)", schema, ErrNoStore)
	}
	return v, err
}
