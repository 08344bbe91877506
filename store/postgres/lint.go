package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statement is a sql effect's statement and how many arguments its
// effect passes, for CheckStatements.
type Statement struct {
	SQL  string
	Args int
}

// ErrUnreachable wraps the error of a server CheckStatements could not
// reach: it checked nothing.
var ErrUnreachable = errors.New("postgres server not reachable")

// CheckStatements prepares each statement on the server at url, each in a
// transaction it rolls back, without running it, and returns what is
// wrong with each ("" when nothing): the server's refusal (a table or
// column that does not exist, a syntax error, a type that does not fit),
// or a number of parameters other than its Args. A server it cannot
// connect to fails it with an error wrapping ErrUnreachable.
func CheckStatements(ctx context.Context, url string, stmts []Statement) ([]string, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store.url: %w", err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, redactedConn(cfg), err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	out := make([]string, len(stmts))
	for i, st := range stmts {
		if out[i], err = check(ctx, c, st); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, redactedConn(cfg), err)
		}
	}
	return out, nil
}

// check prepares st in a transaction it rolls back. Only a failure of the
// connection itself is an error.
func check(ctx context.Context, c *pgx.Conn, st Statement) (string, error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	sd, err := c.PgConn().Prepare(ctx, "", st.SQL, nil)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("the server refuses the statement: %s (SQLSTATE %s)", pe.Message, pe.Code), nil
	case err != nil:
		return "", err
	case len(sd.ParamOIDs) != st.Args:
		return fmt.Sprintf("the server counts %d parameters in the statement, but args lists %d", len(sd.ParamOIDs), st.Args), nil
	}
	return "", nil
}

func redactedConn(c *pgx.ConnConfig) string { return redacted(&pgxpool.Config{ConnConfig: c}) }
