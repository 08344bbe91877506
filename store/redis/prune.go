package redis

import (
	"context"
	"time"
)

// The pruning task: keys leave by TTL through their own expiry (PX), and
// their batch's key set with them; the task removes expired sets from the
// key index and, beyond MaxEntries, the oldest sets with their keys. One
// member at a time runs it, holding the prune lock; the others find it held
// and wait for their next turn.
const (
	pruneInterval = time.Second
	pruneSets     = 64  // key sets per script call (a batch's keys each)
	pruneMaxCalls = 100 // script calls per turn: the rest waits for the next
)

// pruneLoop prunes every pruneInterval until ctx ends.
func (s *Store) pruneLoop(ctx context.Context) {
	defer s.tasks.Done()
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, _, err := s.prune(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("pruning keys failed", "err", err)
		}
	}
}

// prune takes the prune lock when no other member holds it and removes what
// has expired or is beyond MaxEntries, some key sets per script call. It
// returns how many keys had expired and how many it trimmed.
func (s *Store) prune(ctx context.Context) (expired, trimmed int, err error) {
	held, err := lockScript.Run(ctx, s.c, []string{s.k.pruneLock}, s.holder, (3 * pruneInterval).Milliseconds()).Int()
	if err != nil {
		return 0, 0, s.fail("take the prune lock", err)
	}
	if held != 1 {
		return 0, 0, nil
	}
	for range pruneMaxCalls {
		res, err := pruneScript.Run(ctx, s.c, []string{s.k.keyIndex, s.k.keyCount},
			s.k.keyPrefix(), s.k.keySetPrefix(), s.opts.MaxEntries, pruneSets).Int64Slice()
		if err != nil {
			return expired, trimmed, s.fail("prune keys", err)
		}
		expired += int(res[0])
		trimmed += int(res[1])
		if res[0]+res[1] == 0 {
			break
		}
	}
	if expired+trimmed > 0 {
		s.log.Debug("pruned keys", "expired", expired, "trimmed", trimmed)
	}
	return expired, trimmed, nil
}
