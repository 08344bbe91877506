package postgres

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/engine"
)

// maxAttempts bounds how often Update decides one batch.
const maxAttempts = 10

// errLostRace is another member inserting a key or row between this
// transaction's read and its write.
var errLostRace = errors.New("another member wrote first")

// errLocked is a row lock another transaction held when asked for with
// NOWAIT, or held until the server's lock_timeout ended the wait for it.
var errLocked = errors.New("row locked")

// errCreated is a row that another transaction created while this one
// read: it was neither locked nor claimed, and is locked by reading again.
var errCreated = errors.New("row created by another member while read")

// decideError carries an error from decide, which Update returns as it is.
type decideError struct{ err error }

func (e decideError) Error() string { return e.err.Error() }

// Update reads the rows r names under row locks (each absent one claimed:
// see lockOrClaim), calls decide and writes its batch in the same
// transaction; see engine.SharedStore. decide may be called several times,
// each time with fresh rows.
func (s *Store) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if s.member == "" {
		return ErrReadOnly
	}
	start := time.Now()
	ctx, cancel := s.commitContext(ctx)
	defer cancel()
	n, err := s.update(ctx, r, decide)
	err = s.timedOut(ctx, err)
	s.account(start, n, err)
	return err
}

// Commit writes b without reading, checking only the lease and that its
// audit records follow the member's chain head. Keys, sources and entities
// are upserted; EvictBelow and NextKey are ignored (the store prunes).
// Its sql effects run after the writes; one that fails because of its
// message fails Commit, as it cannot decide again.
func (s *Store) Commit(ctx context.Context, b *engine.Batch) error {
	if s.member == "" {
		return ErrReadOnly
	}
	start := time.Now()
	ctx, cancel := s.commitContext(ctx)
	defer cancel()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		head, err := s.lockMember(ctx, tx)
		if errors.Is(err, errLocked) {
			return waitedRead(err)
		}
		if err != nil {
			return err
		}
		if err := s.write(ctx, tx, b, head, nil); err != nil {
			return err
		}
		err = s.runSQL(ctx, tx, b.SQL, false, false, false)
		s.reopenAfterTimeout(err)
		return err
	})
	err = s.timedOut(ctx, err)
	n := 0
	if err == nil {
		n = len(b.Audit)
	}
	s.account(start, n, err)
	return err
}

// account counts one Update or Commit that wrote n records or failed.
func (s *Store) account(start time.Time, n int, err error) {
	if err != nil {
		s.stats.Failed(err)
		return
	}
	s.stats.Wrote(time.Since(start), n)
}

// update runs attempts until one commits, decide fails, or the retries
// are spent. It returns how many audit records it wrote.
func (s *Store) update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) (int, error) {
	// Row locks are asked for with NOWAIT until one was held, unless the
	// last Update found rows held (heldLast).
	wait := s.heldLast.Swap(false) && !r.SkipHeld
	created := 0 // reads again because a row was created meanwhile: at most once a row
	var last error
	var refused engine.SQLRefusals // keys whose sql effects failed because of their messages
	checkEach := false             // a commit broke a deferred constraint: check each message's (runSQL)
	alone := false                 // the batch deadlocked: its sql effects run alone (runSQL)
	decideRefused := func(rows *engine.Rows) (*engine.Batch, error) {
		rows.Refused = refused
		return decide(rows)
	}
	for attempt := 0; attempt < maxAttempts; {
		var n, held int
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			var err error
			n, held, err = s.attempt(ctx, tx, r, decideRefused, wait, checkEach, alone)
			return err
		})
		var de decideError
		var re refusedError
		var fe deferredError
		switch {
		case err == nil:
			s.stats.HeldRows.Add(uint64(held)) // those of the batch written, not of every attempt
			return n, nil
		case errors.As(err, &de):
			return 0, de.err
		case errors.As(err, &re): // decided again without those messages' effects; not a race
			if refused, err = re.merge(refused, len(r.Keys)); err != nil {
				return 0, err
			}
			continue
		case errors.As(err, &fe) && !checkEach: // run again, finding the message that broke it
			checkEach = true
			continue
		case errors.Is(err, errLocked) && !wait:
			s.stats.LockWaits.Add(1)
			wait = true
			continue
		case errors.Is(err, errLocked):
			return 0, waitedRead(err)
		case errors.Is(err, errCreated) && created < len(r.Sources)+len(r.Entities): // read again: it is there now
			created++
			s.stats.LockWaits.Add(1)
			wait = true // its creator may still hold rows the batch names
			continue
		case lockTableFull(err): // the engine decides the batch in smaller parts
			return 0, lockTableErr(err)
		case !retryable(err):
			return 0, err
		}
		if deadlocked(err) {
			s.log.Warn("postgres store: the batch deadlocked with another transaction and is retried, its sql effects alone in the group",
				"member", s.member, "err", err)
			alone = true
		}
		last = err
		attempt++
		if attempt == maxAttempts {
			break
		}
		s.stats.Retries.Add(1)
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%w: %d attempts, the last: %v", engine.ErrContention, maxAttempts, last)
}

// attempt reads, decides and writes once: the batch, then its sql effects.
// It returns how many audit records it wrote and how many rows it left out
// as held.
func (s *Store) attempt(ctx context.Context, tx pgx.Tx, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error), wait, checkEach, alone bool) (int, int, error) {
	rows, head, err := s.read(ctx, tx, r, wait)
	if err != nil {
		return 0, 0, err
	}
	u := newUpdate(r, rows)
	b, err := decide(rows)
	if err != nil {
		return 0, 0, decideError{err}
	}
	if err := s.write(ctx, tx, b, head, u); err != nil {
		return 0, 0, err
	}
	if err := s.runSQL(ctx, tx, b.SQL, len(rows.Refused) > 0, checkEach, alone); err != nil {
		s.reopenAfterTimeout(err)
		return 0, 0, err
	}
	return len(b.Audit), len(rows.Held.Sources) + len(rows.Held.Entities), nil
}

// inTx runs fn in a transaction on a pooled connection and commits when
// it returns nil. The transaction has the server end its session once it
// has waited for its member longer than the commit timeout
// (beginBounded).
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	c, err := s.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, err := c.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginBounded(s.commitTimeout)})
	if err != nil {
		if c.Conn().IsClosed() {
			return s.brokenErr(ctx, err)
		}
		return dbErr(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		var de decideError
		if c.Conn().IsClosed() && !errors.As(err, &de) {
			return s.brokenErr(ctx, err)
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		if c.Conn().IsClosed() { // the commit may or may not have happened
			return uncertainError{fmt.Errorf("postgres store: the connection to %s broke during the commit, which may or may not have happened: %w", s.where, err)}
		}
		if messageFault(err) != nil {
			return deferredError{dbErr(err)}
		}
		return dbErr(err)
	}
	return nil
}

// deferredError is a commit the server refused for a constraint it checks
// at commit (DEFERRABLE INITIALLY DEFERRED, or a constraint trigger): a
// message's fault, as a statement's refusal is, that no statement
// reported. The store's own tables have none; the user's, written by sql
// effects, may.
type deferredError struct{ err error }

func (e deferredError) Error() string { return e.err.Error() }
func (e deferredError) Unwrap() error { return e.err }

// uncertainError is a commit whose outcome the connection did not return.
type uncertainError struct{ err error }

func (e uncertainError) Error() string { return e.err.Error() }
func (e uncertainError) Unwrap() error { return e.err }

// retryable reports a lost race, a serialization failure or a deadlock.
func retryable(err error) bool {
	if errors.Is(err, errLostRace) || errors.Is(err, errCreated) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// deadlocked reports a transaction PostgreSQL aborted to break a deadlock.
func deadlocked(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// lockTableFull reports a server whose lock table was full ("out of
// shared memory"): a batch holds an advisory lock of each source and
// entity row it creates until it commits (lockOrClaim), and with the
// other sessions' locks they outgrew the table.
func lockTableFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53200"
}

// lockTableErr is engine.ErrLockTable for err (lockTableFull), naming the
// setting to raise: max_locks_per_transaction, unless the server's hint
// names another (max_pred_locks_per_transaction, under serializable
// isolation).
func lockTableErr(err error) error {
	raise := "raise max_locks_per_transaction"
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Hint != "" && !strings.Contains(pe.Hint, "max_locks_per_transaction") {
		raise = "the server's hint: " + pe.Hint
	}
	return fmt.Errorf("%w (%w): a batch holds a lock of each source and entity row it creates until it commits, "+
		"and the server holds max_locks_per_transaction × (max_connections + max_prepared_transactions) locks in all: %s",
		engine.ErrLockTable, err, raise)
}

// backoff sleeps a jittered, growing while before attempt.
func backoff(ctx context.Context, attempt int) error {
	d := min(time.Millisecond<<attempt, 50*time.Millisecond)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lockMember locks the member's row, checks that this handle holds the
// lease and returns the chain head.
func (s *Store) lockMember(ctx context.Context, tx pgx.Tx) (engine.AuditHead, error) {
	return scanMember(tx.QueryRow(ctx, s.sql.lockMember, s.member), s)
}

func scanMember(row pgx.Row, s *Store) (engine.AuditHead, error) {
	var holder string
	var pos int64
	var hash []byte
	if err := row.Scan(&holder, &pos, &hash); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return engine.AuditHead{}, fmt.Errorf("%w: member %q is not registered in schema %q", engine.ErrMemberHeld, s.member, s.schema)
		}
		return engine.AuditHead{}, lockErr(err)
	}
	if holder != s.holder {
		return engine.AuditHead{}, fmt.Errorf("%w: member %q: this process lost its lease to %q; nothing written", engine.ErrMemberHeld, s.member, holder)
	}
	h := engine.AuditHead{Position: uint64(pos)}
	copy(h.Hash[:], hash)
	return h, nil
}

// lockErr reports a lock that was held as errLocked, with the server's
// error: a NOWAIT lock's, or a wait that lock_timeout ended (see
// waitedRead).
func lockErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return fmt.Errorf("%w: %w", errLocked, pe)
	}
	if retryable(err) {
		return err
	}
	return dbErr(err)
}

// waitedRead is the error of a read of a batch's rows (read, lockMember)
// that waited for a row lock until the server's lock_timeout ended the
// wait (errLocked, when the read was not asked for with NOWAIT): the
// user's role or database may set one. It says what the server told, not
// that a row was locked when asked for.
func waitedRead(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return dbErr(err)
	}
	return dbErr(fmt.Errorf("reading the member's row and the batch's sources and entities under their locks: %w", waitedErr("", pe)))
}

// read locks the member row, then the sources and the entities r names,
// each present one locked and each absent one claimed (lockOrClaim), and
// reads r's keys: one round trip. A row another transaction created while
// it read fails it with errCreated; with r.SkipHeld, such a row and one
// another transaction holds are left out and named in the rows' Held.
func (s *Store) read(ctx context.Context, tx pgx.Tx, r *engine.Reads, wait bool) (*engine.Rows, engine.AuditHead, error) {
	lockSources, lockEntities := s.sql.lockSourcesNowait, s.sql.lockEntitiesNowait
	switch {
	case r.SkipHeld:
		lockSources, lockEntities = s.sql.lockSourcesSkip, s.sql.lockEntitiesSkip
	case wait:
		lockSources, lockEntities = s.sql.lockSources, s.sql.lockEntities
	}
	var q pgx.Batch
	q.Queue(s.sql.lockMember, s.member)
	if len(r.Sources) > 0 {
		q.Queue(lockSources, byteSlices(r.Sources))
	}
	if len(r.Entities) > 0 {
		q.Queue(lockEntities, byteSlices(r.Entities))
	}
	if len(r.Keys) > 0 {
		keys := make(byteaArray, len(r.Keys))
		for i := range r.Keys {
			keys[i] = r.Keys[i][:]
		}
		q.Queue(s.sql.readKeys, keys)
	}
	br := tx.SendBatch(ctx, &q)
	rows := &engine.Rows{}
	head, err := scanMember(br.QueryRow(), s)
	if err == nil && len(r.Sources) > 0 {
		rows.Sources, rows.Held.Sources, err = scanStates[engine.SourceState](br, r.Sources, r.SkipHeld, "source")
	}
	if err == nil && len(r.Entities) > 0 {
		rows.Entities, rows.Held.Entities, err = scanStates[engine.EntityState](br, r.Entities, r.SkipHeld, "entity")
	}
	if err == nil && len(r.Keys) > 0 {
		rows.Keys, err = scanKeys(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = lockErr(cerr)
	}
	if err == nil && !rows.Held.Empty() {
		s.heldLast.Store(true)
	}
	return rows, head, err
}

// row is a source's or an entity's state, as its row holds it.
type row[T any] interface {
	*T
	encoding.BinaryUnmarshaler
}

// scanStates decodes the states a lock-or-claim statement returns
// for names (ascending). Unless every name was either locked or claimed
// (an empty state), it fails with errCreated, or with skip returns the
// names left out.
func scanStates[T any, P row[T]](br pgx.BatchResults, names []string, skip bool, what string) (out []T, left []string, err error) {
	rs, err := br.Query()
	if err != nil {
		return nil, nil, lockErr(err)
	}
	got := make(map[string]bool, len(names))
	for rs.Next() {
		var v T
		var name, b []byte
		if err := rs.Scan(&name, &b); err != nil {
			return nil, nil, dbErr(err)
		}
		got[string(name)] = true
		if len(b) == 0 {
			continue // claimed
		}
		if err := P(&v).UnmarshalBinary(b); err != nil {
			rs.Close()
			return nil, nil, fmt.Errorf("postgres store: %w", err)
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, lockErr(err)
	}
	if len(got) == len(names) {
		return out, nil, nil
	}
	for _, name := range names {
		if !got[name] {
			left = append(left, name)
		}
	}
	if !skip {
		return nil, nil, fmt.Errorf("%w: %d of %d %s rows", errCreated, len(left), len(names), what)
	}
	return out, left, nil
}

func scanKeys(br pgx.BatchResults) ([]engine.KeyEntry, error) {
	rs, err := br.Query()
	if err != nil {
		return nil, lockErr(err)
	}
	var out []engine.KeyEntry
	for rs.Next() {
		var k engine.KeyEntry
		var key, digest []byte
		var t, ord int64
		if err := rs.Scan(&key, &digest, &t, &ord); err != nil {
			return nil, dbErr(err)
		}
		copy(k.Key[:], key)
		copy(k.Digest[:], digest)
		k.Time, k.Ordinal = t, uint64(ord)
		out = append(out, k)
	}
	if err := rs.Err(); err != nil {
		return nil, lockErr(err)
	}
	return out, nil
}

func byteSlices(ss []string) byteaArray {
	out := make(byteaArray, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// beginBounded begins a transaction whose session the server ends, rolling
// the transaction back, once it has waited longer than timeout for its
// member's next statement (idle_in_transaction_session_timeout, for this
// transaction only; in the same round trip as BEGIN).
//
// A member's host that dies, or whose network to the server goes silent,
// in the middle of a batch sends no FIN or RST: without the bound its
// session would hold every row and key its batch locked until the
// server's TCP keepalive gave up (hours on a default Linux), and every
// other member's batch naming one of them would wait as long. The member
// itself gives a transaction no longer than timeout (store.commit_timeout
// bounds each Update and Commit from before BEGIN, and the connection is
// closed when it ends), so a member still alive never meets the bound.
func beginBounded(timeout time.Duration) string {
	return fmt.Sprintf("BEGIN; SET LOCAL idle_in_transaction_session_timeout = %d", timeout.Milliseconds())
}
