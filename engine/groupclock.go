package engine

import (
	"errors"
	"time"
)

// ServerClock is the clock of a shared store's server, read when the
// member's lease is taken and each time it is renewed (Capabilities.Clock).
// Safe for concurrent use.
type ServerClock interface {
	// ServerTime returns the latest reading of the server's clock; false
	// before the first.
	ServerTime() (ServerReading, bool)
}

// ServerReading is one reading of a store server's clock: Server was read
// between Sent and Received, this process's clock (as time.Now returns it,
// with its monotonic reading) before the request and after its answer.
type ServerReading struct {
	Server, Sent, Received time.Time
}

// ErrNoServerClock is returned by New when a shared store that reads its
// server's clock has no reading of it: the group's keys would be stamped
// by this member's wall clock.
var ErrNoServerClock = errors.New("replayguard: the shared store has not read its server's clock")

// clockDrift bounds how far this process's monotonic clock and the store
// server's clock may drift apart while they run: each slewed by NTP at
// most 500 ppm.
const clockDrift = 1000 // parts per million

// groupClock is the clock a member of a group stamps keys with and judges
// their age by (DESIGN.md, "Stores and consumer groups"): the store
// server's, read at each lease take and renewal and advanced by this
// process's monotonic clock in between, so that a step of the member's
// wall clock changes nothing and every member agrees with the others
// within the round trips of their readings. Audit records keep the
// member's wall time.
//
// A reading only brackets the server's clock: it was read between Sent
// and Received. Keys are stamped by the top of the bracket (plus the drift
// since) and judged by the bottom (less the drift), so that no member
// finds a key older than the server's clock says it is.
//
// Each new reading is followed, whichever way the server's clock moved
// (a step, or a failover to a standby whose clock differs): a step back
// keeps keys longer, a step forward ages them by the step, as it does the
// keys Redis expires and PostgreSQL's pruning deletes. Until every member
// has read the server's clock again (its next lease renewal), members
// differ by the step: that is logged.
//
// Linux's monotonic clock stands still while the machine is suspended: a
// member that resumes would stamp keys behind the server's clock until its
// next reading, and the others would find them older than they are. So the
// stamp moves on by as much as this process's wall clock ran ahead of the
// monotonic clock since the reading (a suspension, or a step forward of the
// wall clock): a key stamped ahead stays longer, never shorter.
type groupClock struct {
	src   ServerClock
	since func(time.Time) time.Duration // time.Since: monotonic between readings that have one
	wall  func() time.Time              // time.Now
	last  time.Time                     // Received of the reading anchored to
	judge line                          // the latest reading's bottom
	stamp line                          // the latest reading's top
	// stepped is how far the latest reading is off the one before,
	// beyond their brackets and the drift (0: within them), for the log.
	stepped time.Duration
}

// line is a clock that reads base at at and runs with the monotonic clock.
type line struct {
	base int64 // unix nanoseconds
	at   time.Time
}

// after returns the line's reading d after at, off by the most the drift
// could make it, down (sign -1) or up (sign 1).
func (l line) after(d time.Duration, sign int64) int64 {
	return l.base + int64(d) + sign*int64(d)/1e6*clockDrift
}

// anchor takes the latest reading, when there is a new one; false when
// there is none.
func (c *groupClock) anchor() bool {
	r, ok := c.src.ServerTime()
	if !ok {
		return false
	}
	if !c.last.IsZero() && r.Received.Equal(c.last) {
		return true
	}
	half := max(r.Received.Sub(r.Sent), 0) / 2
	mid := r.Sent.Add(half)
	judge := line{base: r.Server.UnixNano() - int64(half), at: mid}
	stamp := line{base: r.Server.UnixNano() + int64(half), at: mid}
	c.stepped = 0
	if !c.last.IsZero() {
		// Monotonic when both have a reading; by the wall clock too, which
		// runs on while the machine is suspended.
		d, dw := mid.Sub(c.judge.at), mid.Round(0).Sub(c.judge.at.Round(0))
		switch low, high := c.judge.after(min(d, dw), -1), c.stamp.after(max(d, dw), 1); {
		case stamp.base < low:
			c.stepped = time.Duration(stamp.base - low)
		case judge.base > high:
			c.stepped = time.Duration(judge.base - high)
		}
	}
	c.last, c.judge, c.stamp = r.Received, judge, stamp
	return true
}

// now reads the key clock for a batch: the stamp of the keys it applies,
// and the cutoff below which a stamp has expired after ttl.
func (c *groupClock) now(ttl time.Duration) (stamp, cutoff int64) {
	c.anchor()
	d := c.since(c.stamp.at)
	suspended := max(c.wall().Round(0).Sub(c.stamp.at.Round(0))-d, 0) // the wall clock ran ahead of the monotonic
	return c.stamp.after(d, 1) + int64(suspended), c.judged() - int64(ttl)
}

// judged is the clock keys are judged by, now: the latest reading's
// bottom, advanced by the monotonic clock less the drift. Neither a step
// of this member's wall clock nor a suspension moves it ahead.
func (c *groupClock) judged() int64 { return c.judge.after(c.since(c.judge.at), -1) }

// journalTime is the time a journal entry carries, and the journal's
// retention runs by (JournalEntry.Time): where the store reads its
// server's clock, the group's clock that keys are judged by, from the
// reading the last batch took (the engine's load takes the first), so that
// a step of this member's wall clock neither trims entries a recovery
// still needs (a step forward) nor keeps them, and every entry after them,
// for as long as the step (a step back); else the wall clock. Called with
// e.mu held.
func (e *Engine) journalTime() time.Time {
	if e.group == nil {
		return e.opts.Now()
	}
	return time.Unix(0, e.group.judged()).UTC()
}

// readGroupClock reads the group's key clock for the batch about to be
// decided, and logs a move of the server's clock the latest reading saw.
func (e *Engine) readGroupClock() (stamp, cutoff int64) {
	c := e.group
	stamp, cutoff = c.now(e.ttl)
	if c.stepped != 0 {
		e.log.Warn("the store server's clock moved by more than its readings' round trips since it was last read (a step, or a failover to a server whose clock differs): "+
			"the group's keys follow it; a step back keeps them longer, a step forward ages them by the step",
			"step", c.stepped, "key_clock", time.Unix(0, stamp).UTC())
		c.stepped = 0
	}
	return stamp, cutoff
}
