package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaVersion is the newest layout this build knows: the number of
// migrations. Open refuses a schema written by a newer build.
const schemaVersion = 2

// migrations[i] takes a schema from version i to i+1. "{s}" stands for the
// quoted schema name. Identifiers and names are bytea: a source id is
// binary, and bytea orders bytewise, as the engine sorts them.
var migrations = []string{
	`CREATE TABLE {s}.members (
		member        text COLLATE "C" PRIMARY KEY,
		number        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
		holder        text NOT NULL DEFAULT '',
		lease_expires timestamptz NOT NULL DEFAULT '-infinity',
		head_position bigint NOT NULL DEFAULT 0,
		head_hash     bytea NOT NULL DEFAULT '\x'
	);
	CREATE TABLE {s}.keys (
		key     bytea PRIMARY KEY,
		digest  bytea NOT NULL,
		time    bigint NOT NULL,
		ordinal bigint NOT NULL
	);
	-- The one index pruning needs: ordinals are at least the time a key
	-- was applied (engine.loadRows), so keys older than the ttl are found
	-- among those with ordinals below the cutoff.
	CREATE INDEX keys_ordinal ON {s}.keys (ordinal);
	CREATE TABLE {s}.sources (id bytea PRIMARY KEY, state bytea NOT NULL);
	CREATE TABLE {s}.entities (name bytea PRIMARY KEY, state bytea NOT NULL);
	CREATE TABLE {s}.audit (
		member   bigint NOT NULL, -- members.number
		position bigint NOT NULL,
		record   bytea NOT NULL,
		PRIMARY KEY (member, position)
	);
	CREATE TABLE {s}.quarantine (id bigint PRIMARY KEY, entry bytea NOT NULL, payload bytea NOT NULL);`,
	outboxMigration,
}

// migrate creates the schema or brings it to schemaVersion, in one
// transaction under an advisory lock, so that members starting at once
// wait for each other and the second finds the work done. A read-only
// handle only checks the version.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, readOnly bool) error {
	s := pgx.Identifier{schema}.Sanitize()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if !readOnly {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('replayguard migrate ' || $1))`, schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s+`;
			CREATE TABLE IF NOT EXISTS `+s+`.schema_version (
				one     boolean PRIMARY KEY DEFAULT true CHECK (one),
				version integer NOT NULL
			);
			INSERT INTO `+s+`.schema_version (version) VALUES (0) ON CONFLICT DO NOTHING`); err != nil {
			return err
		}
	}
	var v int
	err = tx.QueryRow(ctx, `SELECT version FROM `+s+`.schema_version`).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return fmt.Errorf("schema %q holds no replayguard store (open it with a member id once to create it)", schema)
	}
	if err != nil {
		return err
	}
	switch {
	case v > schemaVersion:
		return fmt.Errorf("schema %q has version %d, newer than this build knows (%d): upgrade replayguard", schema, v, schemaVersion)
	case v == schemaVersion:
		return nil
	case readOnly:
		return fmt.Errorf("schema %q has version %d, older than this build's %d: open it with a member id to migrate it", schema, v, schemaVersion)
	}
	for ; v < schemaVersion; v++ {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(migrations[v], "{s}", s)); err != nil {
			return fmt.Errorf("migrate schema %q to version %d: %w", schema, v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s+`.schema_version SET version = $1`, v); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
