package forward

import (
	"errors"
	"fmt"
)

// Errors of the drainer and the outputs.
var (
	// ErrConfig is returned by New and the output constructors for an
	// invalid option.
	ErrConfig = errors.New("forward: invalid configuration")
	// ErrUndelivered is returned by Drain when entries are still pending
	// as its context ends.
	ErrUndelivered = errors.New("forward: entries left pending")
	// ErrNoStream is returned by the NATS output when no JetStream stream
	// takes the subject: the entry waits, and is tried again, until one
	// does.
	ErrNoStream = errors.New("forward: no JetStream stream takes the subject")
	// ErrRefused is what a *RefusedError wraps.
	ErrRefused = errors.New("forward: refused by the downstream")
)

// RefusedError says that the downstream refused one entry for good (a
// webhook's 4xx, a PUBACK reason code that no retry changes): retrying
// cannot deliver it. The drainer holds the entry for an operator, with
// Reason, and goes on after it.
type RefusedError struct {
	Index  int    // the entry's index in the entries passed to Deliver
	Reason string // the downstream's answer: status or reason code, and the start of its body
}

func (e *RefusedError) Error() string { return fmt.Sprintf("%v: %s", ErrRefused, e.Reason) }

func (e *RefusedError) Unwrap() error { return ErrRefused }
