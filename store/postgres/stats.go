package postgres

import "github.com/replayguard/replayguard/engine"

// SharedStats returns the store's counters since Open. LockWaits counts
// batches whose row locks were held by another transaction when first
// asked for (FOR UPDATE NOWAIT failed, and the batch waited), and those
// that found a row they read absent created by another member meanwhile
// (the batch waited for it, and read again).
func (s *Store) SharedStats() engine.SharedStats { return s.stats.Stats(s.notDurable, s.leaseTTL) }
