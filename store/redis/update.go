package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Update's retries after another member won a race: at most maxAttempts
// decide calls, with a jittered backoff growing from retryBase to retryMax.
const (
	maxAttempts = 10
	retryBase   = time.Millisecond
	retryMax    = 50 * time.Millisecond
)

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
	buf := s.bufs.get()
	defer s.bufs.put(buf)
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
		case "notpending":
			return false, notPending(b, res[1])
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
