package redis

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/replayguard/replayguard/engine"
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
