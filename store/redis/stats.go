package redis

import "github.com/replayguard/replayguard/engine"

// SharedStats returns the store's counters since it was opened. LockWaits
// counts the waits for another Update's row locks.
func (s *Store) SharedStats() engine.SharedStats { return s.stats.Stats(s.durable, s.opts.LeaseTTL) }
