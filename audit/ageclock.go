package audit

import (
	"sync"
	"time"
)

// AgeClock is the clock audit retention measures MaxAge on: the wall time
// of its first reading, advanced by the time that has elapsed since on a
// clock that never steps (the monotonic readings Go's time.Now carries, or
// the elapsed function given), and how far the wall clock has read behind
// it at most since. Audit records carry the wall time of the process that
// decided them (on a shared store, each member's own): a record's age is
// the time elapsed since it was stamped, which a step of the wall clock
// does not change.
//
// A Retention reads it at each pass, after the chain's head: every record
// up to that head was stamped by a wall clock that read no further behind
// this clock than it has at most by then (a step back that lasted until
// the reading; one undone between two readings is not seen). So after a
// step forward of the wall clock (NTP after a VM resumed, an RTC found
// wrong after boot), no record stamped before it goes before MaxAge has
// elapsed since it was stamped, although by the wall clock each aged by
// the step at once; those stamped after it carry times ahead and stay
// longer by the step. After a step back, the records stamped before it go
// when MaxAge has elapsed, and those stamped after it, whose times are
// behind, no earlier. What it cannot see: a wall clock already wrong at
// the first reading, and the clock of another process (a member's chain
// taken over), which stamped records the first reading knows nothing of.
// Linux's monotonic clock stands still while the machine is suspended:
// records then stay longer, never shorter.
//
// Safe for concurrent use; one AgeClock serves every Retention of a
// process.
type AgeClock struct {
	now     func() time.Time
	elapsed func() time.Duration // nil: the monotonic readings of now's times

	mu     sync.Mutex
	set    bool
	wall0  time.Time     // the first reading, its wall time
	at0    time.Time     // the first reading, with its monotonic reading
	el0    time.Duration // elapsed() at the first reading
	behind time.Duration // the most the wall clock read behind this clock: 0 or less
}

// NewAgeClock returns an AgeClock over the wall clock now (nil: time.Now)
// and, when it is not nil, elapsed: the time elapsed since any fixed
// origin on a clock that never steps (nil: the monotonic readings of now's
// times).
func NewAgeClock(now func() time.Time, elapsed func() time.Duration) *AgeClock {
	if now == nil {
		now = time.Now
	}
	return &AgeClock{now: now, elapsed: elapsed}
}

// Read reads the clock: its time, and the most the wall clock has read
// behind it since its first reading (0 or less).
func (c *AgeClock) Read() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var el time.Duration
	if c.elapsed != nil {
		el = c.elapsed()
	}
	if !c.set {
		c.set, c.wall0, c.at0, c.el0 = true, now.Round(0), now, el
	}
	d := now.Sub(c.at0) // monotonic when both readings have one, else wall
	if c.elapsed != nil {
		d = el - c.el0
	}
	t := c.wall0.Add(d)
	c.behind = min(c.behind, now.Round(0).Sub(t))
	return t, c.behind
}

// ageMark says that the records up to position upto were stamped by a
// wall clock that read no further than behind (0 or less) behind the
// AgeClock.
type ageMark struct {
	upto   uint64
	behind time.Duration
}

// ageMarks are a chain's marks, in position order.
type ageMarks []ageMark

// note marks the records up to head, the chain's head read just before
// the clock read behind.
func (m ageMarks) note(head uint64, behind time.Duration) ageMarks {
	switch n := len(m); {
	case n > 0 && head < m[n-1].upto: // the chain went back (a store that lost commits): what it holds now is marked anew
		return ageMarks{{upto: head, behind: behind}}
	case n > 0 && head == m[n-1].upto:
		return m
	case n > 0 && m[n-1].behind == behind:
		m[n-1].upto = head
		return m
	}
	return append(m, ageMark{upto: head, behind: behind})
}

// since drops the marks of the records at or below base, which the store
// no longer holds.
func (m ageMarks) since(base uint64) ageMarks {
	i := 0
	for i < len(m) && m[i].upto <= base {
		i++
	}
	return m[i:]
}

// behind is the mark of the record at position pos: the last one's when
// none reaches it.
func (m ageMarks) behind(pos uint64) time.Duration {
	for _, k := range m {
		if pos <= k.upto {
			return k.behind
		}
	}
	if len(m) == 0 {
		return 0
	}
	return m[len(m)-1].behind
}
