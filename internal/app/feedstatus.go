package app

import (
	"fmt"
	"strings"

	"github.com/replayguard/replayguard/web"
)

// Ready reports whether at least one feed is connected and committing,
// and the last commit succeeded: a commit is the engine's, whichever feed
// delivered the batch, so a feed with nothing to commit meanwhile does not
// make the consumer ready while the store refuses every commit.
func (s *feedsSource) Ready() bool {
	if s.failing() != nil {
		return false
	}
	for _, f := range s.feeds {
		if f.src.Ready() {
			return true
		}
	}
	return false
}

// NotReady says why Ready is false; "" when it is true.
func (s *feedsSource) NotReady() string {
	if s.Ready() {
		return ""
	}
	if err := s.failing(); err != nil {
		return "the last commit failed: " + err.Error()
	}
	why := make([]string, 0, len(s.feeds))
	for _, f := range s.feeds {
		why = append(why, "feed "+f.name+": "+f.src.NotReady())
	}
	return "no feed takes deliveries: " + strings.Join(why, "; ")
}

// failing returns the error of the feeds' last commit; nil when it
// succeeded.
func (s *feedsSource) failing() error {
	if s.one == nil {
		return nil
	}
	if err := s.one.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// Warning says why the consumer is not ready, or which feeds are not while
// another is: the consumer goes on, on one path. A feed that stopped says
// why, whatever the others do.
func (s *feedsSource) Warning() string {
	if err := s.failing(); err != nil {
		return "commits are failing, the deliveries wait unacknowledged: " + err.Error()
	}
	var down, stopped []string
	for _, f := range s.feeds {
		switch failed := f.failed.Load(); {
		case failed != nil:
			stopped = append(stopped, (*failed).Error())
		case !f.src.Ready():
			down = append(down, f.name)
		}
	}
	ready := len(s.feeds) - len(down) - len(stopped)
	var parts []string
	if len(down) > 0 && ready > 0 {
		parts = append(parts, fmt.Sprintf("feed %s is not connected", strings.Join(down, ", ")))
	}
	if len(stopped) > 0 {
		parts = append(parts, "stopped, tried again shortly: "+strings.Join(stopped, "; "))
	}
	if len(parts) == 0 {
		return ""
	}
	if ready > 0 {
		parts[len(parts)-1] += ": consuming from the other path"
	}
	return strings.Join(parts, "; ")
}

// withWarning adds warning's text to what status says.
func withWarning(status func() web.StoreStatus, warning func() string) func() web.StoreStatus {
	return func() web.StoreStatus {
		var st web.StoreStatus
		if status != nil {
			st = status()
		}
		st.Warning = joinNonEmpty(st.Warning, warning())
		return st
	}
}

// withSourceStatus adds to status why the source is not ready, when status
// itself says nothing: /readyz then names what holds the member back (the
// broker, a subscription, the last commit) rather than guessing.
func withSourceStatus(status func() web.StoreStatus, src source) func() web.StoreStatus {
	return func() web.StoreStatus {
		var st web.StoreStatus
		if status != nil {
			st = status()
		}
		if st.Error == "" {
			st.Error = src.NotReady()
		}
		return st
	}
}

// Status reports each feed for the API and the dashboard.
func (s *feedsSource) Status() []web.FeedStatus {
	out := make([]web.FeedStatus, len(s.feeds))
	for i, f := range s.feeds {
		// Its broker connection, as replayguard_feed_connected, not its
		// readiness: a store that refuses commits holds every feed back,
		// and is no broker's fault.
		out[i] = f.proc.Status(f.src.Connected())
	}
	return out
}

// Status is the feed's state for the API and the dashboard, its broker
// connection up or not.
func (f *FeedProcessor) Status(connected bool) web.FeedStatus {
	deliveries, first, dups := f.Counts()
	return web.FeedStatus{Name: f.name, Connected: connected, Deliveries: deliveries, First: first, Duplicates: dups,
		AppliedAgain: f.AppliedAgain(), BehindSeconds: f.Behind().Seconds()}
}
