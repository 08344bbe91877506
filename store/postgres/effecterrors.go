package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/engine"
)

// stmtErr is the error of a statement that failed: a refusedError when its
// message is the cause, else the error naming the statement's route and
// effect. st is nil for savepoint control, which no message causes.
func stmtErr(st *engine.SQLStatement, err error) error {
	if st == nil {
		return dbErr(err)
	}
	if reason := refusal(st, err); reason != "" {
		return refusedError{engine.SQLRefusals{st.Key: reason}}
	}
	return dbErr(fmt.Errorf("route %q effects[%d]: sql: %w", st.Route, st.Effect, waitedErr(fmt.Sprintf("statement %q", st.SQL), err)))
}

// waitCodes are the SQLSTATEs of a statement the server cancelled, or
// aborted, because of a lock or a time: lock_timeout or a NOWAIT lock
// (55P03), statement_timeout or a cancel request (57014), a deadlock
// (40P01). None is a message's fault: the batch is retried.
var waitCodes = map[string]bool{"55P03": true, "57014": true, "40P01": true}

// waitedErr is err, when the server cancelled or aborted a statement for
// a lock or a time (waitCodes), followed by what the server tells of it:
// the row the statement waited for (the context of a wait for a row's
// transaction, "while updating tuple (0,1) in relation "cells""), the
// rest of the error's context (the function, and the statement in it,
// that ran), and for a deadlock the processes and what each waited for;
// then what (the statement, when the caller's words do not name it), and
// that the batch will be retried. Nothing else is said: the server does
// not tell which transaction held a lock past lock_timeout, nor whether a
// statement cancelled by statement_timeout was waiting, unless a row's
// context says so. Another error is returned as it is.
func waitedErr(what string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !waitCodes[pe.Code] {
		return err
	}
	var waited, context []string
	for _, l := range strings.Split(pe.Where, "\n") {
		switch l = strings.TrimSpace(l); {
		case l == "":
		case strings.HasPrefix(l, "while "):
			waited = append(waited, l)
		default:
			context = append(context, l)
		}
	}
	var b strings.Builder
	if len(waited) > 0 {
		b.WriteString(", " + strings.Join(waited, ", "))
	}
	if len(context) > 0 {
		b.WriteString(" (in " + strings.Join(context, ", in ") + ")")
	}
	if pe.Code == "40P01" && pe.Detail != "" {
		b.WriteString(": " + strings.Join(strings.Fields(pe.Detail), " "))
	}
	if what != "" {
		b.WriteString("; " + what)
	}
	return fmt.Errorf("%w%s; nothing was committed, and the batch will be retried", err, b.String())
}

// unprepared is the error of a pipeline the server refused to prepare
// (a missing table or column, a syntax error, a lock timeout while
// preparing), naming the route and effect of the statement it refused:
// pgx reports that error at the pipeline's first query, whichever
// statement it is about. It is nil when err is another error, or names
// none of stmts.
func unprepared(stmts []engine.SQLStatement, err error) error {
	var pp pgx.ErrPreprocessingBatch
	if !errors.As(err, &pp) {
		return nil
	}
	for i := range stmts {
		if stmts[i].SQL == pp.SQL() {
			return dbErr(fmt.Errorf("route %q effects[%d]: sql: %w", stmts[i].Route, stmts[i].Effect, err))
		}
	}
	return nil
}

// checkErr is the error of the check at the end of st's message (see
// runSQLSavepoints): a refusedError when the message broke a deferred
// constraint, else the error as it is.
func checkErr(st *engine.SQLStatement, err error) error {
	if pe := messageFault(err); pe != nil {
		return refusedError{engine.SQLRefusals{st.Key: fmt.Sprintf("sql effects: SQLSTATE %s at the end of the message's statements: %s", pe.Code, words(pe))}}
	}
	return dbErr(fmt.Errorf("route %q: sql: checking the deferred constraints: %w", st.Route, waitedErr("", err)))
}

// refusal returns why st's message is refused when err is its message's
// fault (messageFault), else "".
func refusal(st *engine.SQLStatement, err error) string {
	pe := messageFault(err)
	if pe == nil {
		return ""
	}
	return fmt.Sprintf("sql effects[%d]%s: SQLSTATE %s: %s", st.Effect, runText(st), pe.Code, words(pe))
}

// runText names which of its message's runs st is, when its effect ran
// more than once for the message (engine.SQLStatement.Run), else "".
func runText(st *engine.SQLStatement) string {
	if st.Runs == 0 {
		return ""
	}
	return fmt.Sprintf(" (run %d of %d)", st.Run, st.Runs)
}

// messageFault returns the server's error when err is the fault of the
// message whose statement raised it, else nil. That is an error of
// SQLSTATE class 22 (data exception: a value that does not fit, a bad
// cast), 23 (integrity constraint violation: the user's unique key, a
// check) or 54 (program limit exceeded: a value too large for its index),
// 20 or 21 (a CASE the value matched no branch of, a subquery or an upsert
// that met two rows where the statement allows one), or an exception the
// user's trigger or function raised: P0001 raise_exception and P0004
// assert_failure (its author's refusal of the row), P0002 and P0003 (a
// SELECT INTO STRICT the message's values found no row, or several, for),
// and any code of a class PostgreSQL does not define (RAISE … USING
// ERRCODE = 'RG001': a code of the function's own, which only its author
// raises). Retried, any of them would fail the same way and hold up the
// feed. Preparing the statement is not running it: a statement that fails
// to prepare is no message's fault.
func messageFault(err error) *pgconn.PgError {
	var pp pgx.ErrPreprocessingBatch
	var pe *pgconn.PgError
	if errors.As(err, &pp) || !errors.As(err, &pe) || len(pe.Code) != 5 {
		return nil
	}
	switch class := pe.Code[:2]; {
	case class == "20", class == "21", class == "22", class == "23", class == "54",
		pe.Code == "P0001", pe.Code == "P0002", pe.Code == "P0003", pe.Code == "P0004":
		return pe
	case !serverClasses[class]:
		return pe
	}
	return nil
}

// serverClasses are the SQLSTATE classes PostgreSQL defines (its manual,
// "PostgreSQL Error Codes"); a code of any other class was raised by the
// user's own code.
var serverClasses = map[string]bool{
	"00": true, "01": true, "02": true, "03": true, "08": true, "09": true, "0A": true, "0B": true,
	"0F": true, "0L": true, "0P": true, "0Z": true, "20": true, "21": true, "22": true, "23": true,
	"24": true, "25": true, "26": true, "27": true, "28": true, "2B": true, "2D": true, "2F": true,
	"34": true, "38": true, "39": true, "3B": true, "3D": true, "3F": true, "40": true, "42": true,
	"44": true, "53": true, "54": true, "55": true, "57": true, "58": true, "72": true, "F0": true,
	"HV": true, "P0": true, "XX": true,
}

// words are the server's message and its detail.
func words(pe *pgconn.PgError) string {
	if pe.Detail != "" {
		return pe.Message + " (" + pe.Detail + ")"
	}
	return pe.Message
}
