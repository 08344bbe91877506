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
	consume.Adoption
	up        atomic.Bool // the connection came up: no other is made
	takenOver atomic.Bool // a broker's DISCONNECT said the session was taken over
}

// startAdoption is consume.Adoption.Start, and a Run that no broker has
// accepted within a round over the brokers ends.
func (c *Consumer) startAdoption(ctx context.Context) (context.Context, func()) {
	c.adopt.up.Store(false)
	c.adopt.takenOver.Store(false)
	adoptCtx, stop := c.adopt.Start(ctx)
	wait := time.Duration(len(c.urls)+1) * c.cfg.ConnectTimeout
	timer := time.AfterFunc(wait, func() {
		if !c.adopt.up.Load() {
			c.adopt.End(fmt.Errorf("%w: no broker accepted the connection within %v", ErrAdoption, wait))
		}
	})
	return adoptCtx, func() {
		timer.Stop()
		stop()
	}
}

// adoptUp is connectionUp of an adopting Run: on the session resumed it
// starts leaving the group on its behalf; without one, Run ends.
func (c *Consumer) adoptUp(ca *paho.Connack) {
	c.adopt.up.Store(true)
	if !ca.SessionPresent {
		c.adopt.End(fmt.Errorf("%w: client id %q", ErrNoSession, c.cfg.ClientID))
		return
	}
	c.subscribed.Store(true)
	c.adopt.Begin()
}

// adoptDown is connectionDown of an adopting Run, which then ends: what
// is not acknowledged stays in the session.
func (c *Consumer) adoptDown() {
	if c.adopt.takenOver.Load() {
		c.adopt.End(fmt.Errorf("%w: client id %q", ErrTakenOver, c.cfg.ClientID))
		return
	}
	c.adopt.End(fmt.Errorf("%w: the connection was lost", ErrAdoption))
}
