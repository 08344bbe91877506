package consume

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// HoldPoll is how often a consumer held off its brokers asks its hold
// again.
const HoldPoll = time.Second

// ErrHeld refuses a connection while a consumer's hold says why.
var ErrHeld = errors.New("mqtt: not connecting while held")

// Hold is a consumer's Config.Hold, asked before it connects: while Why
// says why, no connection is made. It logs as a hold begins and ends.
type Hold struct {
	Why  func() string // nil: never held
	Log  *slog.Logger
	held atomic.Bool
}

// Held asks Why and reports whether no connection may be made now.
func (h *Hold) Held() bool {
	why := ""
	if h.Why != nil {
		why = h.Why()
	}
	was := h.held.Swap(why != "")
	switch {
	case why != "" && !was:
		h.Log.Warn("mqtt not connecting until the hold ends: " + why)
	case why == "" && was:
		h.Log.Info("mqtt connecting again: the hold ended")
	}
	return why != ""
}

// Active reports whether the last Held said held.
func (h *Hold) Active() bool { return h.held.Load() }
