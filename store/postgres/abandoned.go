package postgres

import (
	"context"
	"time"
)

// endAbandonedSQL ends the sessions of replayguard members (application
// name "replayguard …") that wait, in the middle of a statement, for their
// member to send the rest of it (state active, wait event ClientRead),
// holding a lock on a table of schema $2 in a transaction begun more than
// $1 microseconds ago, and returns them. A session idle between statements
// is the server's to end (idle_in_transaction_session_timeout), and one at
// work (a migration's long statement) waits for no client. Candidates
// first: pg_terminate_backend in a WHERE clause could be called for a row
// the other conditions leave out.
const endAbandonedSQL = `WITH cand AS MATERIALIZED (
	SELECT a.pid, a.application_name, a.xact_start FROM pg_stat_activity a
	WHERE a.pid <> pg_backend_pid() AND a.application_name LIKE 'replayguard %'
	AND a.state = 'active' AND a.wait_event = 'ClientRead'
	AND a.xact_start < now() - $1::bigint * interval '1 microsecond'
	AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE l.pid = a.pid AND n.nspname = $2))
	SELECT application_name, xact_start, pg_terminate_backend(pid) FROM cand`

// endAbandoned ends, with each lease renewal, the group's sessions still
// in a transaction twice store.commit_timeout after it began. A member
// never keeps a transaction that long: it gives up at commit_timeout and
// closes the connection. But a member whose host died, or whose network
// to the server went silent, while the server waited for the rest of its
// statement (a COPY's rows, the rest of a pipeline) sends no FIN, and the
// server bounds that wait by nothing (idle_in_transaction_session_timeout
// counts only between statements, a cancel is not taken while it reads
// from the client): the session would hold the rows and keys its batch
// locked, and every other member's batch naming one of them would wait,
// until the server's TCP keepalive gave up, hours later.
func (s *Store) endAbandoned() {
	ctx, cancel := context.WithTimeout(s.bgCtx, s.leaseTTL/3)
	defer cancel()
	rows, err := s.pool.Query(ctx, endAbandonedSQL, (2 * s.commitTimeout).Microseconds(), s.schema)
	if err != nil {
		s.log.Warn("postgres store: look for members' sessions left in a transaction", "member", s.member, "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var app string
		var began time.Time
		var ended bool
		if err := rows.Scan(&app, &began, &ended); err != nil {
			s.log.Warn("postgres store: end a member's session left in a transaction", "member", s.member, "err", err)
			return
		}
		s.log.Warn("postgres store: ended a member's session left in its transaction past twice store.commit_timeout",
			"member", s.member, "session", app, "transaction_began", began, "ended", ended)
	}
	if err := rows.Err(); err != nil {
		s.log.Warn("postgres store: end a member's session left in a transaction", "member", s.member, "err", err)
	}
}
