package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/web"
)

// runner is what replayguard consumes with in the demo: source/mqtt's
// consumer on one path, or feeds on several.
type runner interface {
	// Run consumes until ctx is done; it returns early on a permanent
	// refusal.
	Run(ctx context.Context) error
	// Ready reports whether replayguard is connected and committing; safe
	// from any goroutine.
	Ready() bool
	// NotReady says why Ready is false; "" when it is true.
	NotReady() string
}

// guardFeed is one path of replayguard's mqtt.feeds: its own consumer and
// session, and the broker it is connected to, which it hears from its
// consumer's events.
type guardFeed struct {
	name     string
	clientID string // its session's
	consumer *mqtt.Consumer
	proc     *app.FeedProcessor     // what names the feed on its deliveries, and counts them
	broker   atomic.Pointer[string] // nil while down
}

// Observe follows the feed's connection.
func (f *guardFeed) Observe(e source.Event) {
	switch e.Kind {
	case source.Connected:
		b := e.Broker
		f.broker.Store(&b)
	case source.Disconnected:
		f.broker.Store(nil)
	}
}

// on reports whether the feed is connected to broker, subscribed and
// committing.
func (f *guardFeed) on(broker string) bool {
	b := f.broker.Load()
	return b != nil && *b == broker && f.consumer.Ready()
}

// feeds runs replayguard's paths at the same time into one engine, the
// way `run` does: each through its app.FeedProcessor, which names its feed
// on each delivery and passes the feeds' batches to the engine one at a
// time; a feed that returns early stops the others.
type feeds []*guardFeed

func (fs feeds) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() {
			defer cancel()
			if err := f.consumer.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("feed %s: %w", f.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Ready reports whether at least one feed is connected and committing.
func (fs feeds) Ready() bool {
	for _, f := range fs {
		if f.consumer.Ready() {
			return true
		}
	}
	return false
}

// NotReady says why no feed is ready; "" when one is.
func (fs feeds) NotReady() string {
	if fs.Ready() {
		return ""
	}
	why := make([]string, len(fs))
	for i, f := range fs {
		why[i] = "feed " + f.name + ": " + f.consumer.NotReady()
	}
	return "no feed takes deliveries: " + strings.Join(why, "; ")
}

// warning names the feeds not ready while another is: replayguard goes
// on, on the other path. "" when every feed is ready, or none is.
func (fs feeds) warning() string {
	var down []string
	for _, f := range fs {
		if !f.consumer.Ready() {
			down = append(down, f.name)
		}
	}
	if len(down) == 0 || len(down) == len(fs) {
		return ""
	}
	return fmt.Sprintf("feed %s is not connected: consuming from the other path", strings.Join(down, ", "))
}

// status reports each feed for the API and the dashboard, as `run` does.
func (fs feeds) status() []web.FeedStatus {
	out := make([]web.FeedStatus, len(fs))
	for i, f := range fs {
		out[i] = f.proc.Status(f.consumer.Connected())
	}
	return out
}

// named returns the feed called name, or nil.
func (fs feeds) named(name string) *guardFeed {
	for _, f := range fs {
		if f.name == name {
			return f
		}
	}
	return nil
}

// receiptObserver tells a tally what a feed received and abandoned, so
// that it knows what is in hand; the feeds' connections are their own
// (guardFeed), not the tally's one connection.
type receiptObserver struct{ t *tally }

func (o receiptObserver) Observe(e source.Event) {
	switch e.Kind {
	case source.Received:
		o.t.received(e.N)
	case source.Abandoned:
		o.t.received(-e.N)
	}
}
