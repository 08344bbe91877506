package forward

import (
	"fmt"
	"strings"
	"time"
)

// OutputStatus is one output goroutine's state: an output kind of one
// member's outbox.
type OutputStatus struct {
	Output string // engine.OutputMQTT, …
	Member string // "" on a single-owner store
	// Delivered and Held count the entries acknowledged downstream and
	// those held since start (refused for good, or held by an operator
	// through this process's engine); Failures the failed attempts.
	Delivered, Held, Failures uint64
	// Failing is set from a failed attempt until the next one succeeds;
	// Since is when the failing began, Attempts how many have failed since,
	// LastError the last one's error.
	Failing   bool
	Since     time.Time
	Attempts  int
	LastError string
	// Stuck is the entry the failing attempts stop at (zero while none
	// has: the outbox could not be read): every entry behind it waits for
	// it. One the downstream refuses alone, for ever, with an error that
	// passes for a retryable one, an operator sets aside with `outbox hold`
	// (engine.Engine.HoldPending).
	Stuck StuckEntry
}

// StuckEntry is a pending entry that failed attempts stopped at.
type StuckEntry struct {
	ID       uint64 // 0: none
	Target   string // redacted (engine.RedactTarget)
	Key      string
	Since    time.Time // its first failed attempt of this run of them
	Attempts int       // failed attempts at it since
}

// Status is the drainer's state, for readiness and the dashboard.
type Status struct {
	Member            string    // the outbox this drainer writes: Options.Member
	Depth, MaxEntries int       // Member's pending entries and their bound
	Full              bool      // Admit is holding batches back
	FullSince         time.Time // when it started to
	Outputs           []OutputStatus
}

// Status returns the drainer's state; outputs ordered by member and kind.
func (d *Drainer) Status() Status {
	st := Status{Member: d.opts.Member}
	st.Depth, st.MaxEntries = d.Depth()
	st.Full, st.FullSince = d.gate.state()
	if since := d.atBound(); !st.Full && !since.IsZero() {
		st.Full, st.FullSince = true, since // the next batch will wait, though none waits yet
	}
	if !st.Full {
		st.FullSince = time.Time{} // when it was full last: not now
	}
	for _, l := range d.snapshotLanes() {
		l.mu.Lock()
		// An output nothing names is shown once it has entries to answer
		// for: a failure to read the outbox is the store's, and is shown
		// by the outputs that are named.
		if _, unset := l.out.(unconfigured); !unset || l.entryFailed || l.st.Held > 0 {
			st.Outputs = append(st.Outputs, l.st)
		}
		l.mu.Unlock()
	}
	return st
}

// Blocked says why the consumer is not committing, or "": the outbox is
// full, with its depth and what the failing outputs last said.
func (s Status) Blocked() string {
	if !s.Full {
		return ""
	}
	why := fmt.Sprintf("outbox full: %d of %d entries pending (outbox.max_entries) for %s; upstream deliveries are not acknowledged until the downstream takes entries again",
		s.Depth, s.MaxEntries, time.Since(s.FullSince).Round(time.Second))
	if f := s.failing(); f != "" {
		why += "; " + f
	}
	return why
}

// Warning says which outputs are failing while the outbox still has room,
// or "".
func (s Status) Warning() string {
	if s.Full {
		return ""
	}
	f := s.failing()
	if f == "" {
		return ""
	}
	return fmt.Sprintf("%s; %d of %d outbox entries pending", f, s.Depth, s.MaxEntries)
}

func (s Status) failing() string {
	var parts []string
	for _, o := range s.Outputs {
		if !o.Failing {
			continue
		}
		who := o.Output + " output"
		if o.Member != "" {
			who += " (member " + o.Member + ")"
		}
		part := fmt.Sprintf("%s failing for %s (%d attempts): %s", who,
			time.Since(o.Since).Round(time.Second), o.Attempts, o.LastError)
		if st := o.Stuck; st.ID != 0 {
			member := ""
			if o.Member != "" {
				member = " --member " + o.Member
			}
			part += fmt.Sprintf(" (at entry %d, %s, key %s: %d attempts over %s; the entries behind it wait: `outbox hold %d%s --reason TEXT` sets it aside once the downstream is known to refuse it alone)",
				st.ID, st.Target, st.Key, st.Attempts, time.Since(st.Since).Round(time.Second), st.ID, member)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// failingText is what the failing outputs say, for logs and errors.
func (d *Drainer) failingText() string {
	if f := d.Status().failing(); f != "" {
		return f
	}
	return "no output is failing"
}
