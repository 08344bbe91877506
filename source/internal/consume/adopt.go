package consume

import (
	"context"
	"fmt"
)

// Adoption is the state of an MQTT consumer's adopting Run (the sources'
// Config.Adopt): its consuming ends on Fatal with why the adoption ended,
// and its leaving of the group, on the adopted session's behalf, begins
// once the broker resumed the session (Begin). The consumer keeps how it
// connects, once, and what its protocol tells it of the session. One
// Adoption serves one consumer, one Run at a time.
type Adoption struct {
	Fatal chan<- error // the consumer's Batches.Fatal; buffered
	Err   error        // the source's ErrAdoption, wrapped by what Start and Result return
	begin func()
}

// Adopting makes l the Leaving of an adopting consumer, for the session
// of the gone member adopted: leave is granted at once (the store's claim
// of the session is the grant) and nothing is recorded as the broker
// grants subscriptions, as none is asked.
func (l *Leaving) Adopting(adopted string) {
	l.Ask = func(context.Context) (bool, error) { return true, nil }
	l.Join, l.Quit = nil, nil
	l.Adopted = adopted
}

// Start returns the context an adopting Run consumes under, done once the
// session is resumed (Begin, which starts the leaving, see
// Leaving.Context); stop releases it. A Run whose ctx is done ends: it
// commits and acknowledges what it holds, and the rest waits in the
// session.
func (a *Adoption) Start(ctx context.Context) (adoptCtx context.Context, stop func()) {
	adoptCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.begin = cancel
	stopped := context.AfterFunc(ctx, func() { a.End(fmt.Errorf("%w: stopped", a.Err)) })
	return adoptCtx, func() {
		stopped()
		cancel()
	}
}

// Begin starts leaving the group on the resumed session's behalf.
func (a *Adoption) Begin() { a.begin() }

// End ends an adopting Run's consuming with err, unless an earlier error
// ended it.
func (a *Adoption) End(err error) {
	select {
	case a.Fatal <- err:
	default:
	}
}

// Result is what an adopting Run returns: why it ended early (runErr), or
// nil once the session went quiet after the group's filters were
// unsubscribed (share).
func (a *Adoption) Result(runErr error, share *Leaving) error {
	if runErr != nil {
		return runErr
	}
	if !share.WentQuiet() {
		return fmt.Errorf("%w: the session did not go quiet", a.Err)
	}
	return nil
}
