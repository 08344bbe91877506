package shared

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Counters are what a shared store's SharedStats reports, updated without a
// lock but for the last error and the lease's end.
type Counters struct {
	Retries, LockWaits, HeldRows atomic.Uint64
	updates, failures            atomic.Uint64
	rows                         atomic.Uint64
	nanos                        atomic.Int64

	mu       sync.Mutex
	lastErr  string
	leaseErr string
	fenced   string // the first error that said another process holds the member's lease
	lease    time.Time
	renewed  time.Time // this process's clock when the lease was last taken or renewed
	async    string
	offset   time.Duration // this process's clock less the store server's
	within   time.Duration // offset's uncertainty: half the round trip
	measured time.Time     // when offset was measured; zero: never
	reading  engine.ServerReading
}

// Clock records a reading of the store server's clock: serverNow, read
// between sent and received, this process's clock (time.Now, with its
// monotonic reading) before the request and after its answer. The group's
// key clock follows it (ServerTime); the offset it gives is this
// process's wall clock less the server's.
func (c *Counters) Clock(serverNow, sent, received time.Time) {
	mid := sent.Add(received.Sub(sent) / 2)
	c.mu.Lock()
	c.offset, c.within, c.measured = mid.Sub(serverNow), received.Sub(sent)/2, received
	c.reading = engine.ServerReading{Server: serverNow, Sent: sent, Received: received}
	c.mu.Unlock()
}

// ServerTime returns the latest reading of the store server's clock
// (engine.ServerClock); false before the first.
func (c *Counters) ServerTime() (engine.ServerReading, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading, !c.reading.Received.IsZero()
}

// Replicating records how the server replicates asynchronously, accepted
// through store.allow_async_replication ("" when a commit waits for its
// replicas, or there are none).
func (c *Counters) Replicating(async string) {
	c.mu.Lock()
	c.async = async
	c.mu.Unlock()
}

// Wrote counts an update that wrote rows audit records in d, and clears
// the last error.
func (c *Counters) Wrote(d time.Duration, rows int) {
	c.updates.Add(1)
	c.rows.Add(uint64(rows))
	c.nanos.Add(int64(d))
	c.mu.Lock()
	c.lastErr = ""
	c.mu.Unlock()
}

// Failed counts an update that failed with err; engine.ErrReadAgain, a
// decide asking for wider reads, is no failure.
func (c *Counters) Failed(err error) {
	if errors.Is(err, engine.ErrReadAgain) {
		return
	}
	c.failures.Add(1)
	c.Noted(err)
	c.fence(err)
}

// fence keeps err for good when it says that another process holds the
// member's lease.
func (c *Counters) fence(err error) {
	if !errors.Is(err, engine.ErrMemberHeld) {
		return
	}
	c.mu.Lock()
	if c.fenced == "" {
		c.fenced = err.Error()
	}
	c.mu.Unlock()
}

// Noted keeps err as the last error without counting a failed update (a
// refused connection's).
func (c *Counters) Noted(err error) {
	c.mu.Lock()
	c.lastErr = err.Error()
	c.mu.Unlock()
}

// LeaseFailed keeps err, a lease renewal's, as the last error and as the
// lease's, until a renewal succeeds (Leased).
func (c *Counters) LeaseFailed(err error) {
	c.mu.Lock()
	c.lastErr, c.leaseErr = err.Error(), err.Error()
	c.mu.Unlock()
	c.fence(err)
}

// Leased records when the member's lease ends unless renewed, and clears
// the lease's error, and the last error when it was the lease's: a member
// with nothing to write renews its lease still.
func (c *Counters) Leased(until time.Time) {
	c.mu.Lock()
	c.lease, c.renewed = until, time.Now()
	if c.lastErr == c.leaseErr {
		c.lastErr = ""
	}
	c.leaseErr = ""
	c.mu.Unlock()
}

// Stats are the counters as engine.SharedStats; notDurable names the
// setting accepted through store.allow_not_durable ("" when durable).
func (c *Counters) Stats(notDurable string, leaseTTL time.Duration) engine.SharedStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return engine.SharedStats{
		Updates:       c.updates.Load(),
		Retries:       c.Retries.Load(),
		Failures:      c.failures.Load(),
		UpdateSeconds: time.Duration(c.nanos.Load()).Seconds(),
		Rows:          c.rows.Load(),
		LockWaits:     c.LockWaits.Load(),
		HeldRows:      c.HeldRows.Load(),
		Durable:       notDurable == "",
		NotDurable:    notDurable,
		LastError:     c.lastErr,
		LeaseError:    c.leaseErr,
		LeaseExpires:  c.lease,
		LeaseRenewed:  c.renewed,
		LeaseTTL:      leaseTTL,
		Fenced:        c.fenced,
		ClockOffset:   c.offset,
		ClockMeasured: c.measured,

		ClockUncertainty: c.within,

		AsyncReplication: c.async,
	}
}
