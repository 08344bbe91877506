package redis

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

// Update's retries after another member won a race: at most maxAttempts
// decide calls, with a jittered backoff growing from retryBase to retryMax.
const (
	maxAttempts = 10
	retryBase   = time.Millisecond
	retryMax    = 50 * time.Millisecond
)

// Row locks: from its read to its write an Update holds a lock on every
// source and entity row its batch touches, so that members whose batches
// share rows take turns instead of losing races to each other. The update
// script's version checks stay what makes a write correct; a lock only
// makes a lost race rare. A member that finds a row locked waits, with a
// jittered sleep growing from lockWaitBase to lockWaitMax, until it can
// take all its locks or lockWaitTTLs lock TTLs have passed. A lock holds
// for a third of the lease unless its Update writes or gives up first, so
// a member that died holding locks delays the others by that much at most.
const (
	lockWaitBase = 200 * time.Microsecond
	lockWaitMax  = 20 * time.Millisecond
	lockWaitTTLs = 2
	unlockTime   = time.Second // bounds releasing the locks of a failed Update
)

// locks are one Update's row locks: the sources', then the entities', in
// the canonical order of the Reads, under a token of this Update's own.
type locks struct {
	names []string
	token string
	held  bool // taken and not yet deleted by a write
}

func (s *Store) newLocks(r *engine.Reads) *locks {
	l := &locks{names: make([]string, 0, len(r.Sources)+len(r.Entities))}
	for _, id := range r.Sources {
		l.names = append(l.names, s.k.sourceLock(id))
	}
	for _, name := range r.Entities {
		l.names = append(l.names, s.k.entityLock(name))
	}
	var nonce [12]byte
	_, _ = crand.Read(nonce[:])
	l.token = hex.EncodeToString(nonce[:])
	return l
}

// lockTTL is how long a row lock holds unless renewed by the next attempt.
func (s *Store) lockTTL() time.Duration { return s.opts.LeaseTTL / 3 }

// unlock releases the locks of an Update that did not write them away.
func (s *Store) unlock(ctx context.Context, l *locks) {
	if !l.held || len(l.names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTime)
	defer cancel()
	if err := unlockScript.Run(ctx, s.c, l.names, l.token, s.k.unlocked).Err(); err != nil {
		// They expire by themselves.
		s.log.Debug("release row locks", "member", s.member, "err", err)
	}
	l.held = false
}

// read is what one batch was decided on: the stored value of each key
// ("" when absent) and the version of each source and entity ("0"), read
// under locks.
type read struct {
	r        *engine.Reads
	locks    *locks
	names    []string // the keys' names
	keys     []string
	sources  []string
	entities []string
}

// Update takes the row locks of the rows r names and reads them with their
// versions in one round trip, calls decide with them and writes the batch
// with the update script, which checks, atomically with the writes, that
// every key and row is as it was read, that the locks are still this
// Update's and that this handle still holds the lease. When a check fails
// it reads and decides again, at most maxAttempts times in all, then fails
// with engine.ErrContention. decide may thus be called several times; only
// the batch of the last call is written. With Options.WaitReplicas, a write
// that fewer replicas acknowledged within Options.WaitTimeout fails: it is
// on the primary, but not counted as committed. The whole Update is bounded
// by Options.CommitTimeout.
func (s *Store) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if err := s.writer("update"); err != nil {
		return err
	}
	ctx, cancel := s.commitContext(ctx)
	defer cancel()
	start := time.Now()
	n, err := s.update(ctx, r, decide)
	if err != nil {
		err = s.timedOut(ctx, "update", err)
		s.stats.Failed(err)
		return err
	}
	s.stats.Wrote(time.Since(start), n)
	return nil
}

func (s *Store) update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) (int, error) {
	l := s.newLocks(r)
	defer s.unlock(ctx, l)
	deadline := time.Now().Add(lockWaitTTLs * s.lockTTL())
	for attempt := 1; ; attempt++ {
		rows, rd, err := s.read(ctx, r, l, deadline)
		if err != nil {
			return 0, err
		}
		b, err := decide(rows)
		if err != nil {
			return 0, err
		}
		again, err := s.write(ctx, b, rd)
		if err != nil || !again {
			return len(b.Audit), err
		}
		if attempt == maxAttempts {
			return 0, fmt.Errorf("%w: member %q, %d attempts", engine.ErrContention, s.member, attempt)
		}
		s.stats.Retries.Add(1)
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
}

// backoff sleeps a random time below retryBase·2^(attempt-1), at most retryMax.
func backoff(ctx context.Context, attempt int) error {
	return sleep(ctx, rand.N(min(retryBase<<(attempt-1), retryMax))+1)
}

func sleep(ctx context.Context, d time.Duration) error { return sleepUnless(ctx, d, nil) }

// sleepUnless sleeps d, or until woken is closed.
func sleepUnless(ctx context.Context, d time.Duration, woken <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-woken:
		return nil
	}
}

// wake ends the waits of this handle's Updates for row locks when any
// member deletes its locks: the store tells the unlocked channel, which
// wakeLoop listens to. A wait that misses it (the channel was out of reach)
// ends with its sleep.
type wake struct {
	mu sync.Mutex
	ch chan struct{}
}

// next returns a channel closed at the next release.
func (w *wake) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *wake) released() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// wakeLoop tells waiting Updates of each release until ctx ends.
func (s *Store) wakeLoop(ctx context.Context) {
	defer s.tasks.Done()
	ps := s.c.Subscribe(ctx, s.k.unlocked)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			s.wake.released()
		}
	}
}

// read takes l and fetches r's keys, sources and entities with their
// versions in one round trip: the read script takes the locks and reads the
// rows, and an MGET beside it reads the keys (each key's value is checked on
// its own by the write, so it need not be read with the rows). While another
// Update holds one of the locks it waits, until deadline; then the script
// reads the keys too, once it has the locks.
func (s *Store) read(ctx context.Context, r *engine.Reads, l *locks, deadline time.Time) (*engine.Rows, *read, error) {
	names := make([]string, len(r.Keys))
	for i := range r.Keys {
		names[i] = s.k.key(r.Keys[i])
	}
	keys := make([]string, 0, 4+len(l.names)+len(names))
	keys = append(keys, s.k.sourceVersions, s.k.sources, s.k.entityVersions, s.k.entities)
	keys = append(keys, l.names...)
	args := make([]any, 0, 6+len(r.Sources)+len(r.Entities))
	args = append(args, l.token, s.lockTTL().Milliseconds(), len(l.names), 0, len(r.Sources), len(r.Entities))
	for _, id := range r.Sources {
		args = append(args, id)
	}
	for _, name := range r.Entities {
		args = append(args, name)
	}
	var res, kv []any
	for wait := lockWaitBase; ; wait = min(2*wait, lockWaitMax) {
		var err error
		woken := s.wake.next() // a release after this ends the wait below
		if wait == lockWaitBase {
			res, kv, err = s.readBeside(ctx, keys, args, names)
		} else {
			args[3], kv = len(names), nil
			res, err = readScript.Run(ctx, s.c, append(keys, names...), args...).Slice()
		}
		if err != nil {
			return nil, nil, s.fail("read the batch's rows", err)
		}
		if len(res) == 6 {
			break
		}
		if st, _ := res[0].(string); st != "held" {
			return nil, nil, fmt.Errorf("redis store: the read script answered %v", res)
		}
		s.stats.LockWaits.Add(1)
		d := wait/2 + rand.N(wait/2+1)
		if time.Now().Add(d).After(deadline) {
			return nil, nil, fmt.Errorf("%w: member %q: rows stayed locked by other members for %v",
				engine.ErrContention, s.member, lockWaitTTLs*s.lockTTL())
		}
		if err := sleepUnless(ctx, d, woken); err != nil {
			return nil, nil, err
		}
	}
	l.held = l.held || len(l.names) > 0
	list := func(i, n int) ([]any, error) {
		v, ok := res[i].([]any)
		if !ok || len(v) != n {
			return nil, fmt.Errorf("redis store: the read script answered %d values for %d asked", len(v), n)
		}
		return v, nil
	}
	rows := &engine.Rows{}
	rd := &read{r: r, locks: l, names: names, keys: make([]string, len(r.Keys))}
	if kv == nil {
		var err error
		if kv, err = list(1, len(r.Keys)); err != nil {
			return nil, nil, err
		}
	} else if len(kv) != len(r.Keys) {
		return nil, nil, fmt.Errorf("redis store: MGET answered %d values for %d keys", len(kv), len(r.Keys))
	}
	for i, v := range kv {
		if v, ok := v.(string); ok {
			e, err := decodeKeyValue(r.Keys[i], v)
			if err != nil {
				return nil, nil, fmt.Errorf("redis store: %w", err)
			}
			rows.Keys = append(rows.Keys, e)
			rd.keys[i] = v
		}
	}
	for _, set := range []struct {
		at, n  int
		decode func(vs, ds []any) ([]string, error)
	}{
		{2, len(r.Sources), func(vs, ds []any) ([]string, error) { return decodeRows(vs, ds, &rows.Sources) }},
		{4, len(r.Entities), func(vs, ds []any) ([]string, error) { return decodeRows(vs, ds, &rows.Entities) }},
	} {
		vs, err := list(set.at, set.n)
		if err != nil {
			return nil, nil, err
		}
		ds, err := list(set.at+1, set.n)
		if err != nil {
			return nil, nil, err
		}
		v, err := set.decode(vs, ds)
		if err != nil {
			return nil, nil, err
		}
		if set.at == 2 {
			rd.sources = v
		} else {
			rd.entities = v
		}
	}
	return rows, rd, nil
}

// readBeside runs the read script, which reads no keys, and an MGET of
// names in one pipeline, loading the script first when the server does not
// know it.
func (s *Store) readBeside(ctx context.Context, keys []string, args []any, names []string) (res, kv []any, err error) {
	for range 2 {
		var script *goredis.Cmd
		var mget *goredis.SliceCmd
		_, err = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			script = readScript.EvalSha(ctx, p, keys, args...)
			if len(names) > 0 {
				mget = p.MGet(ctx, names...)
			}
			return nil
		})
		if err != nil && goredis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
			if err = readScript.Load(ctx, s.c).Err(); err == nil {
				continue
			}
		}
		if err != nil {
			return nil, nil, err
		}
		if res, err = script.Slice(); err != nil {
			return nil, nil, err
		}
		if mget != nil {
			kv = mget.Val()
		} else {
			kv = []any{}
		}
		return res, kv, nil
	}
	return nil, nil, err
}

// decodeRows appends the present rows of data and returns the version of
// each ("0" for an absent one).
func decodeRows[T any](vs, ds []any, out *[]T) ([]string, error) {
	versions := make([]string, len(vs))
	for i, v := range vs {
		versions[i] = "0"
		if v, ok := v.(string); ok {
			versions[i] = v
		}
		d, ok := ds[i].(string)
		if !ok {
			continue
		}
		var row T
		if err := json.Unmarshal([]byte(d), &row); err != nil {
			return nil, fmt.Errorf("redis store: decode %T: %w", row, err)
		}
		*out = append(*out, row)
	}
	return versions, nil
}

// Commit writes b as Update would, without reading or checking anything
// but the lease and the chain head: its audit records must follow this
// member's head, else it fails with engine.ErrAuditGap. EvictBelow and
// NextKey mean nothing to a shared store: the pruning task bounds the keys.
// It waits for the replicas and is bounded as Update is.
func (s *Store) Commit(ctx context.Context, b *engine.Batch) error {
	if err := s.writer("commit"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redis store: commit: %w", err)
	}
	ctx, cancel := s.commitContext(ctx)
	defer cancel()
	start := time.Now()
	if _, err := s.write(ctx, b, nil); err != nil { // nothing checked: never to be decided again
		err = s.timedOut(ctx, "commit", err)
		s.stats.Failed(err)
		return err
	}
	s.stats.Wrote(time.Since(start), len(b.Audit))
	return nil
}

// write runs the update script for b, checked against rd (nil: Commit,
// nothing checked but the lease and the chain head). It returns true when
// a check failed and the batch should be decided again.
func (s *Store) write(ctx context.Context, b *engine.Batch, rd *read) (bool, error) {
	if b == nil || b.Empty() {
		return false, nil
	}
	if err := contiguous(s.member, b.Audit); err != nil {
		return false, err
	}
	buf := bufs.Get().(*[]byte)
	defer bufs.Put(buf)
	keys, args, err := s.scriptArgs(b, rd, buf)
	if err != nil {
		return false, err
	}
	for range 2 {
		res, waitErr, err := s.runUpdate(ctx, keys, args)
		if err != nil {
			return false, s.fail("write the batch", err)
		}
		switch res[0] {
		case "ok":
			if rd != nil {
				rd.locks.held = false // the script deleted them
			}
			return false, waitErr // not acknowledged by the replicas: failed, and decided again
		case "conflict":
			return true, nil
		case "gap":
			return false, fmt.Errorf("%w: member %q: record at position %d after the stored head at %s",
				engine.ErrAuditGap, s.member, b.Audit[0].Position, res[1])
		case "notfound":
			id, _ := strconv.ParseUint(res[1], 16, 64)
			return false, fmt.Errorf("%w: quarantine entry %d is no longer open; nothing was written", engine.ErrNotFound, id)
		case "notheld":
			return false, notHeld(b, res[1])
		case "lease":
			if res[1] != "" {
				return false, s.fenced(res[1])
			}
			// The lease expired (the store was out of reach for longer than
			// it lasts) and nobody took it: take it back and write again.
			if err := s.renew(ctx); err != nil {
				return false, err
			}
			continue
		}
		return false, fmt.Errorf("redis store: the update script answered %q", res)
	}
	return false, fmt.Errorf("redis store: member %q: the lease was lost again as soon as it was taken back", s.member)
}

// contiguous checks that recs' positions follow each other.
func contiguous(member string, recs []engine.AuditRecord) error {
	for i := 1; i < len(recs); i++ {
		if recs[i].Position != recs[i-1].Position+1 {
			return fmt.Errorf("%w: member %q: record at position %d after %d",
				engine.ErrAuditGap, member, recs[i].Position, recs[i-1].Position)
		}
	}
	return nil
}

// bufs hold the key sets and audit records of batches being written: they
// are the bulk of a batch, and go-redis is done with them once the script
// has answered.
var bufs = sync.Pool{New: func() any { return new([]byte) }}

// scriptArgs lays b out as the update script's KEYS and ARGV; the key set
// and the audit records are in *buf.
func (s *Store) scriptArgs(b *engine.Batch, rd *read, buf *[]byte) ([]string, []any, error) {
	var setID, setMember string
	*buf, setID, setMember = keySet((*buf)[:0], b.Keys)
	set := (*buf)[:len(*buf):len(*buf)]
	var lk *locks
	if rd != nil {
		lk = rd.locks
	} else {
		lk = &locks{}
	}
	keys := make([]string, 0, 13+readKeys(rd)+len(b.Keys)+len(lk.names))
	keys = append(keys, s.k.lease(s.member), s.k.heads, s.k.chain(s.member), s.k.chainIndex(s.member),
		s.k.sourceVersions, s.k.sources, s.k.entityVersions, s.k.entities, s.k.quarantine, s.k.quarIDs,
		s.k.keyIndex, s.k.keyCount, s.k.keySetPrefix()+setID)
	// Checked keys: those read, then any batch key that was not (it must
	// still be absent). Commit checks none.
	var checked, written []byte // a byte per checked key, per idempotency key in KEYS
	var present []string
	values := make([]string, 0, len(b.Keys)) // by KEYS position
	if rd != nil {
		keys = append(keys, rd.names...)
		checked = make([]byte, len(rd.keys), len(rd.keys)+len(b.Keys))
		for i, v := range rd.keys {
			checked[i] = '0'
			if v != "" {
				checked[i] = '1'
				present = append(present, v)
			}
		}
		values = make([]string, len(rd.keys), len(rd.keys)+len(b.Keys))
		for i := range b.Keys {
			j, ok := slices.BinarySearchFunc(rd.r.Keys, b.Keys[i].Key, func(a, b engine.Hash) int { return bytes.Compare(a[:], b[:]) })
			if !ok {
				keys = append(keys, s.k.key(b.Keys[i].Key))
				checked = append(checked, '0')
				j = len(values)
				values = append(values, "")
			} else if live(rd.keys[j], rd.r.KeyCutoff) {
				return nil, nil, fmt.Errorf("redis store: the batch overwrites key %s, live when read (applied after the cutoff)", b.Keys[i].Key)
			}
			values[j] = encodeKeyValue(&b.Keys[i])
		}
	} else {
		for i := range b.Keys {
			keys = append(keys, s.k.key(b.Keys[i].Key))
			values = append(values, encodeKeyValue(&b.Keys[i]))
		}
	}
	written = make([]byte, len(values))
	for i, v := range values {
		written[i] = '0'
		if v != "" {
			written[i] = '1'
		}
	}
	var srcChk, entChk []string
	if rd != nil {
		srcChk, entChk = pairs(rd.r.Sources, rd.sources), pairs(rd.r.Entities, rd.entities)
	}
	var head string
	var audit []byte
	first := uint64(0)
	if n := len(b.Audit); n > 0 {
		first = b.Audit[0].Position
		head = encodeHead(engine.AuditHead{Position: b.Audit[n-1].Position, Hash: b.Audit[n-1].Hash})
		var err error
		if *buf, err = appendRecords(*buf, b.Audit); err != nil {
			return nil, nil, err
		}
		audit = (*buf)[len(set):]
	}
	args := make([]any, 0, 23+len(present)+len(srcChk)+len(entChk)+len(b.Keys)+
		2*len(b.Sources)+2*len(b.Entities)+2*len(b.Quarantine)+len(b.Resolved))
	args = append(args, s.holder, s.member, first, head, len(checked), len(srcChk)/2, len(entChk)/2,
		len(b.Keys), len(b.Sources), len(b.Entities), len(b.Audit), len(b.Quarantine), len(b.Resolved),
		s.opts.TTL.Milliseconds(), setMember, set, audit, checked, written, len(present), lk.token, len(lk.names), s.k.unlocked)
	for _, v := range present {
		args = append(args, v)
	}
	for _, v := range srcChk {
		args = append(args, v)
	}
	for _, v := range entChk {
		args = append(args, v)
	}
	for _, v := range values {
		if v != "" {
			args = append(args, v)
		}
	}
	for i := range b.Sources {
		j, err := json.Marshal(&b.Sources[i])
		if err != nil {
			return nil, nil, fmt.Errorf("redis store: encode source: %w", err)
		}
		args = append(args, b.Sources[i].ID(), j)
	}
	for i := range b.Entities {
		j, err := json.Marshal(&b.Entities[i])
		if err != nil {
			return nil, nil, fmt.Errorf("redis store: encode entity %q: %w", b.Entities[i].Name, err)
		}
		args = append(args, b.Entities[i].Name, j)
	}
	for i := range b.Quarantine {
		j, err := json.Marshal(&b.Quarantine[i])
		if err != nil {
			return nil, nil, fmt.Errorf("redis store: encode quarantine entry %d: %w", b.Quarantine[i].ID, err)
		}
		args = append(args, quarantineID(b.Quarantine[i].ID), j)
	}
	for _, id := range b.Resolved {
		args = append(args, quarantineID(id))
	}
	keys, args, err := s.outboxArgs(b, keys, args)
	if err != nil {
		return nil, nil, err
	}
	return append(keys, lk.names...), args, nil
}

// appendRecords encodes recs one JSON a line (the JSON of a record holds no
// newline).
func appendRecords(out []byte, recs []engine.AuditRecord) ([]byte, error) {
	out = slices.Grow(out, 640*len(recs))
	start := len(out)
	for i := range recs {
		var err error
		if len(out) > start {
			out = append(out, '\n')
		}
		if out, err = engine.AppendRecordJSON(out, &recs[i]); err != nil {
			return nil, fmt.Errorf("redis store: encode audit record %d: %w", recs[i].Position, err)
		}
	}
	return out, nil
}

// keySet appends the batch's key set (each key's 32 bytes and ordinal) to
// set and returns it with its random id and member of the key index: the
// lowest ordinal, the id and the number of keys.
func keySet(set []byte, ks []engine.KeyEntry) (_ []byte, id, member string) {
	var nonce [8]byte
	_, _ = crand.Read(nonce[:])
	id = hex.EncodeToString(nonce[:])
	low := uint64(0)
	set = slices.Grow(set, 40*len(ks))
	for i := range ks {
		if i == 0 || ks[i].Ordinal < low {
			low = ks[i].Ordinal
		}
		set = append(set, ks[i].Key[:]...)
		set = binary.BigEndian.AppendUint64(set, ks[i].Ordinal)
	}
	m := binary.BigEndian.AppendUint64(nil, low)
	m = append(m, id...)
	m = append(m, ':')
	m = strconv.AppendInt(m, int64(len(ks)), 10)
	return set, id, string(m)
}

// live reports whether a stored key value was applied at or after cutoff.
func live(v string, cutoff int64) bool {
	return len(v) == keyValueLen && int64(binary.BigEndian.Uint64([]byte(v[32:40]))) >= cutoff
}

func readKeys(rd *read) int {
	if rd == nil {
		return 0
	}
	return len(rd.keys)
}

// pairs interleaves ids and their versions.
func pairs(ids, versions []string) []string {
	out := make([]string, 0, 2*len(ids))
	for i := range ids {
		out = append(out, ids[i], versions[i])
	}
	return out
}
