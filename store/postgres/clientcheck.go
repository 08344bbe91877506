package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// clientCheckInterval is how often a member's session checks, while one
// of its statements runs, that the member is still connected
// (client_connection_check_interval, PostgreSQL 14 and later).
//
// Without it the server does not notice that the member has gone while a
// statement waits, for a row lock of the user's tables above all: a member
// killed or crashed while its batch's sql effect waited leaves its session
// waiting, holding the member's row and every row and key its batch
// locked, for as long as the lock it waits for is held (a session of the
// user's idle in a transaction: hours). The member restarted meanwhile
// waits behind it as it takes its lease over, before it serves its API or
// says why, and the other members' batches wait for the rows it holds.
// With the check the session ends within the interval, rolled back.
const clientCheckInterval = "1s"

// setClientCheck sets clientCheckInterval for its session unless the
// session has an interval already (the URL's options, the role's or the
// server's setting). A server before PostgreSQL 14 has no such setting
// (current_setting returns NULL): nothing is set.
const setClientCheck = `SELECT set_config('client_connection_check_interval', $1, false)
	WHERE current_setting('client_connection_check_interval', true) = '0'`

// checkClient sets clientCheckInterval on c's session (setClientCheck).
// A server on a platform that cannot check a client's connection refuses
// any interval but 0 (SQLSTATE 22023): its sessions go without.
func checkClient(ctx context.Context, c *pgx.Conn) error {
	_, err := c.Exec(ctx, setClientCheck, clientCheckInterval)
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) && pe.Code == "22023" {
		return nil
	}
	return fmt.Errorf("set client_connection_check_interval on %s: %w", connWhere(c), err)
}
