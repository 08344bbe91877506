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
