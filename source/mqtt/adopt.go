package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/source/internal/consume"
)

// errAdoptedOnce refuses a second connection of an adopting Run: the
// adopted session is resumed once, never taken back from a member that
// returned.
var errAdoptedOnce = errors.New("mqtt: an adopted session is connected to once")

// adoption is the state of an adopting Run (Config.Adopt).
type adoption struct {
	up        atomic.Bool // the connection came up: no other is made
	takenOver atomic.Bool // a broker's DISCONNECT said the session was taken over
	begin     func()      // starts leaving the group on the session's behalf
}

// adoptLeaving is the Leaving of an adopting consumer: leave is granted
// at once (the store's claim of the session is the grant) and nothing is
// recorded as the broker grants subscriptions, as none is asked.
func adoptLeaving(cfg Config) *consume.Leaving {
	return &consume.Leaving{Group: cfg.ShareGroup, Ask: func(context.Context) (bool, error) { return true, nil },
		Timeout: cfg.ShutdownTimeout, Log: cfg.Logger, Filters: cfg.Filters, Adopted: cfg.Adopted}
}

// startAdoption returns the context an adopting Run consumes under, done
// once the session is resumed (which starts the leaving, see
// consume.Leaving.Context); stop releases it. A Run that no broker has
// accepted within a round over the brokers ends, and so does one whose
// ctx is done: it commits and acknowledges what it holds, and the rest
// waits in the session.
func (c *Consumer) startAdoption(ctx context.Context) (context.Context, func()) {
	c.adopt.up.Store(false)
	c.adopt.takenOver.Store(false)
	adoptCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.adopt.begin = cancel
	wait := time.Duration(len(c.urls)+1) * c.cfg.ConnectTimeout
	timer := time.AfterFunc(wait, func() {
		if !c.adopt.up.Load() {
			c.endAdoption(fmt.Errorf("%w: no broker accepted the connection within %v", ErrAdoption, wait))
		}
	})
	stopped := context.AfterFunc(ctx, func() { c.endAdoption(fmt.Errorf("%w: stopped", ErrAdoption)) })
	return adoptCtx, func() {
		stopped()
		timer.Stop()
		cancel()
	}
}

// adoptUp is connectionUp of an adopting Run: on the session resumed it
// starts leaving the group on its behalf; without one, Run ends.
func (c *Consumer) adoptUp(ca *paho.Connack) {
	c.adopt.up.Store(true)
	if !ca.SessionPresent {
		c.endAdoption(fmt.Errorf("%w: client id %q", ErrNoSession, c.cfg.ClientID))
		return
	}
	c.subscribed.Store(true)
	c.adopt.begin()
}

// adoptDown is connectionDown of an adopting Run, which then ends: what
// is not acknowledged stays in the session.
func (c *Consumer) adoptDown() {
	if c.adopt.takenOver.Load() {
		c.endAdoption(fmt.Errorf("%w: client id %q", ErrTakenOver, c.cfg.ClientID))
		return
	}
	c.endAdoption(fmt.Errorf("%w: the connection was lost", ErrAdoption))
}

// endAdoption ends an adopting Run's consuming with err.
func (c *Consumer) endAdoption(err error) {
	select {
	case c.fatal <- err:
	default:
	}
}

// adoptResult is what an adopting Run returns: why it ended early, or
// nil once the session went quiet after the group's filters were
// unsubscribed.
func (c *Consumer) adoptResult(runErr error) error {
	if runErr != nil {
		return runErr
	}
	if !c.share.WentQuiet() {
		return fmt.Errorf("%w: the session did not go quiet", ErrAdoption)
	}
	return nil
}
