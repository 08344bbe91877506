package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DropSchema drops schema and everything in it on the server at url: what
// `replayguard bench --store` made for one run. No member may still use
// it.
func DropSchema(ctx context.Context, url, schema string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("postgres store: drop schema %s: %w", schema, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("postgres store: drop schema %s: %w", schema, err)
	}
	return nil
}

// SchemaSize returns the bytes on disk of every table in schema on the
// server at url, their indexes and TOAST included.
func SchemaSize(ctx context.Context, url, schema string) (int64, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("postgres store: size of schema %s: %w", schema, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	var n int64
	err = c.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("postgres store: size of schema %s: %w", schema, err)
	}
	return n, nil
}
