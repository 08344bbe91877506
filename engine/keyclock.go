package engine

import "time"

// keyClock is the clock a single-owner engine ages its key window by: the
// wall time of its first reading, advanced by the time that has elapsed
// since on a clock that never steps (Options.Elapsed, else the monotonic
// readings Go's time.Now carries). A wall clock that steps forward (NTP
// after a VM resumes, an RTC found wrong after boot) therefore evicts no
// key before window.ttl has really passed, and one that steps back keeps
// none longer. Linux's monotonic clock stands still while the machine is
// suspended: keys then stay longer than ttl, never shorter.
//
// Stored keys keep their wall times (KeyEntry.Time): a process that starts
// ages them by the wall clock, which is all it has.
type keyClock struct {
	elapsed func() time.Duration // nil: the monotonic readings of Now's times
	set     bool
	wall0   int64         // unix nanoseconds of the first reading
	at0     time.Time     // the first reading, with its monotonic reading
	el0     time.Duration // elapsed() at the first reading
	// ahead is the most this clock has read ahead of the wall clock: a key
	// stored during this run is read back (a reload after a failed commit)
	// at its wall time plus ahead, never older than it is.
	ahead int64
	last  int64 // the latest reading, which the batch being decided stamps its keys with
	off   int64 // the wall clock less the key clock at the latest reading
}

// stepAtLeast is the least change of the wall clock against the key clock
// between two readings that read tells of: slewing moves it by at most
// half a millisecond a second.
const stepAtLeast = int64(time.Second)

// read returns the key clock at wall time now and makes it the batch's,
// and by how much the wall clock stepped since the last reading (0: it did
// not).
func (c *keyClock) read(now time.Time) (int64, time.Duration) {
	var el time.Duration
	if c.elapsed != nil {
		el = c.elapsed()
	}
	if !c.set {
		c.set, c.wall0, c.at0, c.el0 = true, now.UnixNano(), now, el
	}
	d := now.Sub(c.at0) // monotonic when both readings have one, else wall
	if c.elapsed != nil {
		d = el - c.el0
	}
	c.last = c.wall0 + int64(d)
	c.ahead = max(c.ahead, c.last-now.UnixNano())
	off := now.UnixNano() - c.last
	step := off - c.off
	c.off = off
	if step > -stepAtLeast && step < stepAtLeast {
		step = 0
	}
	return c.last, time.Duration(step)
}

// stored maps a stored key's wall time onto this clock.
func (c *keyClock) stored(t int64) int64 { return t + c.ahead }

// readKeyClock reads the key clock for the batch about to be decided at
// wall time now, and logs a step of the wall clock.
func (e *Engine) readKeyClock(now time.Time) int64 {
	t, step := e.ages.read(now)
	if step != 0 {
		e.log.Warn("the wall clock stepped: the key window ages by elapsed time, not by the step; audit records carry the wall time",
			"step", step, "wall", now.UTC(), "key_clock", time.Unix(0, t).UTC())
	}
	return t
}
