package redis

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// counters are SharedStats' numbers, updated without a lock except for the
// last error and the lease expiry.
type counters struct {
	updates, retries, failures, rows, lockWaits atomic.Uint64
	nanos                                       atomic.Int64

	mu      sync.Mutex
	lastErr string
	lease   time.Time
}

func (c *counters) wrote(d time.Duration, rows int) {
	c.updates.Add(1)
	c.rows.Add(uint64(rows))
	c.nanos.Add(int64(d))
	c.mu.Lock()
	c.lastErr = ""
	c.mu.Unlock()
}

func (c *counters) failed(err error) {
	c.mu.Lock()
	c.lastErr = err.Error()
	c.mu.Unlock()
}

func (c *counters) leased(until time.Time) {
	c.mu.Lock()
	c.lease = until
	c.mu.Unlock()
}

// SharedStats returns the store's counters since it was opened.
func (s *Store) SharedStats() engine.SharedStats {
	c := &s.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	return engine.SharedStats{
		Updates:       c.updates.Load(),
		Retries:       c.retries.Load(),
		Failures:      c.failures.Load(),
		UpdateSeconds: math.Round(float64(c.nanos.Load())/1e3) / 1e6,
		Rows:          c.rows.Load(),
		LockWaits:     c.lockWaits.Load(),
		Durable:       s.durable == "",
		NotDurable:    s.durable,
		LastError:     c.lastErr,
		LeaseExpires:  c.lease,
		LeaseTTL:      s.opts.LeaseTTL,
	}
}
