package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/engine"
)

// refusedError is statements that failed because of their messages: the
// transaction is rolled back and Update decides the batch again with
// these keys refused.
type refusedError struct{ keys engine.SQLRefusals }

func (e refusedError) Error() string {
	var b strings.Builder
	b.WriteString("postgres store: sql effects refused:")
	for k, reason := range e.keys {
		fmt.Fprintf(&b, " key %s: %s;", k, reason)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// merge adds e's keys to refused, which Update decides the batch with next.
// Every round must refuse a key not refused before (a refused message runs
// no statement), so there are at most as many rounds as the batch has
// keys; anything else is an error, never another round.
func (e refusedError) merge(refused engine.SQLRefusals, batchKeys int) (engine.SQLRefusals, error) {
	if refused == nil {
		refused = engine.SQLRefusals{}
	}
	n := len(refused)
	for k, reason := range e.keys {
		if _, again := refused[k]; !again {
			refused[k] = reason
		}
	}
	switch {
	case len(refused) == n:
		return nil, fmt.Errorf("postgres store: sql effects refused again for keys already refused; nothing written: %w", e)
	case len(refused) > batchKeys:
		return nil, fmt.Errorf("postgres store: %d keys refused in a batch of %d keys; nothing written: %w", len(refused), batchKeys, e)
	}
	return refused, nil
}

// runSQL runs a batch's sql effects in tx, after the batch's keys were
// written and found this member's. A statement that fails because of its
// message (see refusal) fails runSQL with a refusedError naming every
// such message of the batch; any other failure with the error as it is,
// marked as this store's. refused says whether this batch was refused
// before.
//
// The statements are sent as one pipeline behind one savepoint. A refusal
// rolls back to it, and the statements of the other messages run again
// with a savepoint each (runSQLSavepoints), which finds the rest of the
// batch's refusals in one pass; Update then decides the batch once more,
// without the refused messages, and that attempt keeps the savepoints.
//
// pgx prepares each distinct statement once per connection and keeps it in
// the connection's statement cache (QueryExecModeCacheStatement, the
// default), so later batches on the connection only bind and execute it.
// A pipeline that fails drops its statements from the cache (pgx does so
// on any error): a refusal costs one more prepare.
//
// Each pipeline ends with restoreSyncCommit (see there), so that no
// statement decides whether the batch's commit is durable.
//
// checkEach is set once the batch's commit broke a constraint the server
// checks at commit (a deferredError): each message's statements then run
// with every deferrable constraint deferred and checked at their end, so
// the message that breaks one is refused like any other.
//
// The first pipeline starts with the group's lock of sql effects
// (statements.sqlShared, sqlAlone): shared, as every member's batches take it, or, with alone,
// exclusive, for a batch whose statements deadlocked with another
// transaction. Two members whose statements take the user's rows in
// different orders (a statement updating two rows, two effects in
// opposite orders, a trigger) may deadlock, and PostgreSQL then aborts one
// of them; retried alone, that batch waits for the batches that hold
// the lock to commit and keeps the others from starting their statements
// until it has committed, so it cannot deadlock with another member's
// statements again. The lock comes after the batch's own rows are locked
// and written, before any statement of the user's, so it adds no wait
// that could close a cycle: a batch that holds it waits for no row of
// the store's.
func (s *Store) runSQL(ctx context.Context, tx pgx.Tx, stmts []engine.SQLStatement, refused, checkEach, alone bool) error {
	lock := s.sql.sqlShared
	if alone {
		lock = s.sql.sqlAlone
	}
	switch {
	case len(stmts) == 0:
		return nil
	case checkEach:
		return s.runSQLSavepoints(ctx, tx, lock, stmts, nil, true)
	case s.sqlMode == sqlSavepoints || (s.sqlMode == sqlAdaptive && refused):
		return s.runSQLSavepoints(ctx, tx, lock, stmts, nil, false)
	case s.sqlMode == sqlRerun:
		return s.runSQLPipeline(ctx, tx, lock, stmts, false)
	}
	err := s.runSQLPipeline(ctx, tx, lock, stmts, true)
	var re refusedError
	if !errors.As(err, &re) {
		return err
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); err != nil {
		return dbErr(err)
	}
	var rest []engine.SQLStatement
	for _, st := range stmts {
		if _, ok := re.keys[st.Key]; !ok {
			rest = append(rest, st)
		}
	}
	return s.runSQLSavepoints(ctx, tx, "", rest, re.keys, false) // the lock is held: it was taken before the savepoint
}

// reopenAfterTimeout has the pool's connections opened again when err is
// a statement cancelled by statement_timeout (57014) or lock_timeout
// (55P03). Such a batch is retried until the statement runs in time, and
// the timeouts a connection has are those of the role and the database
// when it was opened (ALTER ROLE … SET statement_timeout): on the
// connections it had, an operator's raised or removed timeout would never
// reach the retries, and the feed would stay stopped until run is
// restarted. Opened again, each connection takes the settings as they are
// now. The connections in use are closed as they are released.
func (s *Store) reopenAfterTimeout(err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "57014" || pe.Code == "55P03") {
		s.pool.Reset()
	}
}

// sqlLockErr is the error of lock, the group's lock of sql effects that
// starts a batch's statements (runSQL), taken shared or alone.
func (s *Store) sqlLockErr(lock string, err error) error {
	how := "shared"
	if lock == s.sql.sqlAlone {
		how = "alone, as a batch whose sql effects deadlocked is retried"
	}
	return dbErr(fmt.Errorf("sql: taking the group's lock of sql effects (%s): %w", how, waitedErr("", err)))
}

// sqlMode is how runSQL finds refused messages; the benchmark compares
// them.
type sqlMode uint8

const (
	sqlAdaptive   sqlMode = iota // one savepoint; after a refusal one per message (runSQL)
	sqlRerun                     // no savepoint: the batch is decided again after each refusal
	sqlSavepoints                // always a savepoint per message
)

// savepoint brackets a batch's statements, or one message's.
const savepoint = "replayguard_sql"

// restoreSyncCommit follows a batch's sql effects in their pipeline: it
// sets synchronous_commit back to the value Open checked (Store.syncCommit),
// for the transaction and the connection, and returns the value the
// effects left. A statement may have turned it off (SET LOCAL, SET,
// set_config, a function of the user's), which would make the batch's
// commit, whose success acknowledges the broker, return before its WAL
// is flushed, and with SET or set_config every later commit on the
// connection too. A word check of the statements cannot see set_config
// or a function; setting the value back before the commit covers them
// all, and costs no round trip.
const restoreSyncCommit = `SELECT current_setting('synchronous_commit'), set_config('synchronous_commit', $1, false)`

// queueRestoreSyncCommit ends a pipeline of sql effects: the constraint
// triggers deferred to the commit run first (SET CONSTRAINTS ALL
// IMMEDIATE), for a function they call could turn synchronous_commit off
// as the transaction commits, after restoreSyncCommit; then
// restoreSyncCommit. syncCommitRestored reads their answers.
func (s *Store) queueRestoreSyncCommit(q *pgx.Batch) {
	q.Queue("SET CONSTRAINTS ALL IMMEDIATE")
	q.Queue(restoreSyncCommit, s.syncCommit)
}

// syncCommitRestored reads queueRestoreSyncCommit's answers and says, once,
// when the effects had changed the setting. A deferred constraint the
// effects broke is a deferredError, as at the commit.
func (s *Store) syncCommitRestored(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		if messageFault(err) != nil {
			return deferredError{dbErr(err)}
		}
		return dbErr(fmt.Errorf("sql: running the constraint triggers deferred by the sql effects: %w", waitedErr("", err)))
	}
	var was string
	if err := br.QueryRow().Scan(&was, new(string)); err != nil {
		return dbErr(fmt.Errorf("sql: setting synchronous_commit back to %q after the sql effects: %w", s.syncCommit, err))
	}
	if was != s.syncCommit && !s.syncCommitWarned.Swap(true) {
		s.log.Warn("a sql effect set synchronous_commit: the store sets it back before each commit, so that an acknowledged decision is durable; "+
			"remove the setting from the statement or the functions it calls", "member", s.member, "set_to", was, "set_back_to", s.syncCommit)
	}
	return nil
}

// runSQLPipeline sends the statements as one pipeline, after lock (the
// group's lock of sql effects) and behind a savepoint when asked, and
// stops at the first that fails.
func (s *Store) runSQLPipeline(ctx context.Context, tx pgx.Tx, lock string, stmts []engine.SQLStatement, withSavepoint bool) error {
	var q pgx.Batch
	q.Queue(lock)
	if withSavepoint {
		q.Queue("SAVEPOINT " + savepoint)
	}
	for i := range stmts {
		q.Queue(stmts[i].SQL, sqlArgs(stmts[i].Args)...)
	}
	s.queueRestoreSyncCommit(&q)
	br := tx.SendBatch(ctx, &q)
	_, err := br.Exec()
	locking := err != nil
	var st *engine.SQLStatement // the statement that failed; nil for the lock or the savepoint
	if err == nil && withSavepoint {
		_, err = br.Exec()
	}
	for i := 0; err == nil && i < len(stmts); i++ {
		st = &stmts[i]
		_, err = br.Exec()
	}
	switch named := unprepared(stmts, err); {
	case named != nil:
		err = named
	case locking:
		err = s.sqlLockErr(lock, err)
	case err != nil:
		err = stmtErr(st, err)
	default:
		err = s.syncCommitRestored(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = dbErr(cerr)
	}
	return err
}

// runSQLSavepoints runs the statements with a savepoint around each
// message's: a refused message's statements are rolled back to it and the
// pipeline goes on after that message, so one pass finds every refusal.
// Each refusal costs two round trips (the rollback, the rest of the
// pipeline), each message two more statements. refused are refusals found
// before, which the returned refusedError includes. With checkEach a
// message's statements run with the deferrable constraints deferred
// (SET CONSTRAINTS ALL DEFERRED) and are checked at their end (SET
// CONSTRAINTS ALL IMMEDIATE, which runs the checks pending): a message
// may satisfy a constraint by its last statement, but not by a later
// message's. lock, the group's lock of sql effects, starts the first
// pipeline unless it is "" (taken before).
func (s *Store) runSQLSavepoints(ctx context.Context, tx pgx.Tx, lock string, stmts []engine.SQLStatement, refused engine.SQLRefusals, checkEach bool) error {
	found := maps.Clone(refused)
	if found == nil {
		found = engine.SQLRefusals{}
	}
	rest, undo := stmts, false
	for len(rest) > 0 {
		if undo {
			// Its own round trip: pgx prepares the statements of a batch
			// that failed again, which an aborted transaction refuses.
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); err != nil {
				return dbErr(err)
			}
		}
		var q pgx.Batch
		var sent []queued
		queue := func(st *engine.SQLStatement, atEnd bool, sql string, args ...any) {
			q.Queue(sql, args...)
			sent = append(sent, queued{st: st, atEnd: atEnd})
		}
		if lock != "" {
			q.Queue(lock)
			sent = append(sent, queued{lock: true})
		}
		end := func(last *engine.SQLStatement) {
			if checkEach {
				queue(last, true, "SET CONSTRAINTS ALL IMMEDIATE")
			}
			queue(nil, false, "RELEASE SAVEPOINT "+savepoint)
		}
		for i := range rest {
			st := &rest[i]
			if i == 0 || rest[i-1].Key != st.Key {
				if i > 0 {
					end(&rest[i-1])
				}
				queue(nil, false, "SAVEPOINT "+savepoint)
				if checkEach {
					queue(nil, false, "SET CONSTRAINTS ALL DEFERRED")
				}
			}
			queue(st, false, st.SQL, sqlArgs(st.Args)...)
		}
		end(&rest[len(rest)-1])
		s.queueRestoreSyncCommit(&q)
		br := tx.SendBatch(ctx, &q)
		var failed queued
		var err error
		for _, sq := range sent {
			if _, err = br.Exec(); err != nil {
				failed = sq
				break
			}
		}
		if err == nil {
			if err := s.syncCommitRestored(br); err != nil {
				br.Close()
				return err
			}
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			return dbErr(cerr)
		}
		if err == nil {
			break
		}
		if named := unprepared(rest, err); named != nil {
			return named
		}
		if failed.lock {
			return s.sqlLockErr(lock, err)
		}
		lock = "" // held till the transaction ends, whatever is rolled back
		if failed.atEnd {
			err = checkErr(failed.st, err)
		} else {
			err = stmtErr(failed.st, err)
		}
		var re refusedError
		if !errors.As(err, &re) {
			return err
		}
		found[failed.st.Key] = re.keys[failed.st.Key]
		rest, undo = skipMessage(rest, failed.st), true
	}
	if len(found) > 0 {
		return refusedError{found}
	}
	return nil
}

// queued is a query of runSQLSavepoints' pipeline: the statement it
// runs, nil for savepoint control, or, atEnd, the check of the
// constraints pending at the end of st's message; or the group's lock of
// sql effects.
type queued struct {
	st    *engine.SQLStatement
	atEnd bool
	lock  bool
}

// skipMessage returns the statements after failed's message.
func skipMessage(rest []engine.SQLStatement, failed *engine.SQLStatement) []engine.SQLStatement {
	i := 0
	for &rest[i] != failed {
		i++
	}
	for i < len(rest) && rest[i].Key == failed.Key {
		i++
	}
	return rest[i:]
}

// sqlArgs are a statement's arguments for pgx. Every value goes as a Go
// string, which pgx sends in the text format whatever the parameter's type
// (pgx v5: ExtendedQueryBuilder.chooseParameterFormatCode, and
// encodePlanStringToAnyTextFormat sends the bytes as they are), so the
// server reads it with the parameter type's own input function: a JSON
// number's exact decimal text becomes the numeric, bigint, double
// precision or jsonb the statement wants without passing through a
// float64, a string stays text, "true"/"false" become a boolean. A JSON
// null or an absent path is NULL.
//
// A string goes as a sqlString: to a json or jsonb parameter pgx sends a
// Go string's bytes as JSON text, so the producer's string "123" would be
// the number 123 and "{\"role\":\"admin\"}" an object (and "hello" no
// JSON at all, its message quarantined). A sqlString marshals as a JSON
// string there; for every other type pgx sends its text as a string's.
func sqlArgs(as []engine.SQLArg) []any {
	out := make([]any, len(as))
	for i, a := range as {
		switch a.Kind {
		case engine.ArgNull:
		case engine.ArgString:
			out[i] = sqlString(a.Text)
		default:
			out[i] = a.Text
		}
	}
	return out
}

// sqlString is a JSON string argument. pgx's json codecs take a
// json.Marshaler before anything else; the other codecs find no plan for
// it in binary, fall back to the text format and send its underlying
// string as is. It must not be a pgtype.TextValuer: pgx sends one raw in
// the text format, json included.
type sqlString string

// MarshalJSON implements json.Marshaler.
func (s sqlString) MarshalJSON() ([]byte, error) { return json.Marshal(string(s)) }
