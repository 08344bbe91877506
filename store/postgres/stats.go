package postgres

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// stats are the counters SharedStats reports.
type stats struct {
	updates, retries, failures, rows, lockWaits atomic.Uint64
	updateNanos                                 atomic.Int64
	durable                                     bool   // set at Open
	notDurable                                  string // set at Open

	mu           sync.Mutex
	lastError    string
	leaseExpires time.Time
}

func (st *stats) setError(err error) {
	st.mu.Lock()
	st.lastError = err.Error()
	st.mu.Unlock()
}

func (st *stats) clearError() {
	st.mu.Lock()
	st.lastError = ""
	st.mu.Unlock()
}

func (st *stats) setLease(t time.Time) {
	st.mu.Lock()
	st.leaseExpires = t
	st.mu.Unlock()
}

// SharedStats returns the store's counters since Open. LockWaits counts
// batches whose row locks were held by another transaction when first
// asked for (FOR UPDATE NOWAIT failed, and the batch waited).
func (s *Store) SharedStats() engine.SharedStats {
	st := &s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	return engine.SharedStats{
		Updates:       st.updates.Load(),
		Retries:       st.retries.Load(),
		Failures:      st.failures.Load(),
		UpdateSeconds: float64(st.updateNanos.Load()) / float64(time.Second),
		Rows:          st.rows.Load(),
		LockWaits:     st.lockWaits.Load(),
		Durable:       st.durable,
		NotDurable:    st.notDurable,
		LastError:     st.lastError,
		LeaseExpires:  st.leaseExpires,
		LeaseTTL:      s.leaseTTL,
	}
}
