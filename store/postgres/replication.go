package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// replicationQuery reads, in one round trip, what decides whether a commit
// acknowledged on this connection can be lost when a standby is promoted.
// walsenders whose state the role may not read (it lacks pg_read_all_stats)
// are counted apart: a backup's walsender looks the same to it.
const replicationQuery = `SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
	(SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'),
	(SELECT count(*) FROM pg_stat_replication WHERE state IS NULL),
	pg_is_in_recovery()`

// replication is what replicationQuery read.
type replication struct {
	standbyNames string // synchronous_standby_names
	syncCommit   string // synchronous_commit, this session's
	streaming    int64  // standbys streaming from this server
	hidden       int64  // walsenders whose state this role may not read
	inRecovery   bool   // the server is itself a standby
}

// async says how a commit acknowledged on this server can be lost when one
// of its streaming standbys is promoted: "" when every commit waits for a
// standby (synchronous_standby_names set and synchronous_commit on,
// remote_write or remote_apply) or none streams.
func (r replication) async() string {
	if r.streaming == 0 {
		return ""
	}
	n := strconv.FormatInt(r.streaming, 10) + " streaming standby"
	if r.streaming > 1 {
		n += "s"
	}
	switch {
	case strings.TrimSpace(r.standbyNames) == "":
		return n + ", synchronous_standby_names empty"
	case r.syncCommit == "off" || r.syncCommit == "local":
		return n + ", synchronous_commit = " + r.syncCommit
	}
	return ""
}

// refusal is the error that refuses r's server at where for a member, nil
// when r is acceptable: a standby, or a primary whose standbys stream
// asynchronously unless allowed.
func (r replication) refusal(where string, allow bool) error {
	if r.inRecovery {
		return fmt.Errorf("postgres store: %s is a standby (in recovery): point store.url at the primary, "+
			"or list every host with target_session_attrs=read-write", where)
	}
	if allow || r.async() == "" {
		return nil
	}
	verb := "standby streams"
	if r.streaming > 1 {
		verb = "standbys stream"
	}
	setting, fix := "synchronous_standby_names empty", "set synchronous_standby_names, e.g. '*' or 'ANY 1 (...)'"
	if strings.TrimSpace(r.standbyNames) != "" {
		setting = "synchronous_commit = " + r.syncCommit
		fix = "set synchronous_commit = on (or remote_write, remote_apply)"
	}
	return fmt.Errorf("postgres store: %d %s from %s with %s: a commit acknowledged here can be lost when a standby is promoted "+
		"(%s, or store.allow_async_replication: true to accept that; the member's journal then recovers what a failover loses)",
		r.streaming, verb, where, setting, fix)
}

// afterConnect checks every new connection of a member's handle, so that
// a reconnect after a failover, or to another of store.url's hosts, checks
// again: a standby, or a primary whose standbys stream asynchronously
// (unless Options.AllowAsyncReplication), is refused and the connection
// not used. A refusal after Open is kept as the last error and logged.
// It then makes the session check, while a statement runs, that the member
// is still connected (checkClient). The connection encodes byteaArray
// arguments itself (registerByteaArray).
func (s *Store) afterConnect(ctx context.Context, c *pgx.Conn) error {
	registerByteaArray(c)
	var r replication
	err := c.QueryRow(ctx, replicationQuery).Scan(&r.standbyNames, &r.syncCommit, &r.streaming, &r.hidden, &r.inRecovery)
	if err != nil {
		return fmt.Errorf("read the replication settings of %s: %w", connWhere(c), err)
	}
	if err := r.refusal(connWhere(c), s.allowAsync); err != nil {
		if s.opened.Load() {
			s.stats.Noted(err)
			s.log.Error("postgres store: a new connection is refused", "member", s.member, "err", err)
		}
		return refusedConn{err}
	}
	s.noteReplication(r)
	return checkClient(ctx, c)
}

// refusedConn is afterConnect's refusal of a connection, which Open and
// conn return as it is.
type refusedConn struct{ err error }

func (e refusedConn) Error() string { return e.err.Error() }
func (e refusedConn) Unwrap() error { return e.err }

// noteReplication reports an accepted asynchronous replication in the
// stats, and logs when what it reports changes.
func (s *Store) noteReplication(r replication) {
	async := r.async()
	s.replMu.Lock()
	changed, hiddenChanged := async != s.async, r.hidden > 0 && !s.hiddenWarned
	s.async = async
	s.hiddenWarned = s.hiddenWarned || r.hidden > 0
	s.replMu.Unlock()
	if changed {
		s.stats.Replicating(async)
		if async != "" {
			s.log.Warn("postgres store replicates asynchronously (store.allow_async_replication): a failover may lose acknowledged decisions, which only the members' journals bring back",
				"replication", async)
		} else {
			s.log.Info("postgres store: no standby streams asynchronously any more")
		}
	}
	if hiddenChanged {
		s.log.Warn("postgres store: cannot see whether standbys stream asynchronously: the role may not read pg_stat_replication's state (grant it pg_monitor)",
			"walsenders", r.hidden)
	}
}

// connWhere names the server c is connected to, without a password: with
// several hosts in store.url, the one c reached.
func connWhere(c *pgx.Conn) string {
	cfg := c.Config()
	host := cfg.Host + ":" + strconv.Itoa(int(cfg.Port))
	if nc := c.PgConn().Conn(); nc != nil {
		host = nc.RemoteAddr().String()
	}
	return "postgres://" + cfg.User + "@" + host + "/" + cfg.Database
}

// diagnoseTimeout bounds the query that looks for what a transaction that
// timed out waited for.
const diagnoseTimeout = 2 * time.Second

// errCommitTimeout is the cause of the context Options.CommitTimeout ends.
var errCommitTimeout = errors.New("store.commit_timeout")

// commitContext bounds one Update or Commit by Options.CommitTimeout.
func (s *Store) commitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.commitTimeout, errCommitTimeout)
}

// timedOut replaces err, when ctx's CommitTimeout ended the transaction,
// by an error that says so, whether the commit may have happened, and what
// the server was waiting for, as well as it can tell.
func (s *Store) timedOut(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errCommitTimeout) {
		return err
	}
	what, outcome := "transaction", "was not committed"
	var ue uncertainError
	if errors.As(err, &ue) {
		what, outcome = "commit", "may or may not have happened"
	}
	err = fmt.Errorf("postgres store: the %s waited longer than %v (store.commit_timeout) for the server %s and %s: %s: %w",
		what, s.commitTimeout, s.where, outcome, s.waitingFor(), context.DeadlineExceeded)
	s.log.Error("postgres store: a transaction timed out", "member", s.member, "err", err)
	return err
}

// waitingFor guesses, with a short query of its own, what a transaction
// that timed out waited for.
func (s *Store) waitingFor() string {
	ctx, cancel := context.WithTimeout(s.bgCtx, diagnoseTimeout)
	defer cancel()
	var names string
	var syncRep int64
	err := s.pool.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'),
		(SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep')`).Scan(&names, &syncRep)
	switch {
	case err != nil:
		return "a server that does not answer? (" + err.Error() + ")"
	case strings.TrimSpace(names) != "":
		return fmt.Sprintf("a synchronous standby that does not answer? synchronous_standby_names = '%s' (sessions waiting for it: %d)", names, syncRep)
	}
	return "a row lock held that long, or a server that does not answer? (synchronous_standby_names is empty)"
}
