package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/mqttprobe"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
)

// feedsSource consumes every path of mqtt.feeds at the same time into one
// engine, each its own session on its own connection. The engine decides a
// message's copy from the other path duplicate (its key was applied), and a
// message one path lost is applied from the other, late if it comes after
// its successors. Each delivery is acknowledged on its own path, after its
// commit.
type feedsSource struct {
	feeds []*feedSource
	one   *oneAtATime // the feeds' commits; nil: not known
	log   *slog.Logger
	// retryMin and retryMax bound the pause before a feed that returned
	// early is run again; zero: feedRetryMin and feedRetryMax.
	retryMin, retryMax time.Duration
}

// The pauses before a feed that returned early is run again.
const (
	feedRetryMin = time.Second
	feedRetryMax = time.Minute
)

// feedConsumer is a feed's consumer: a source that tells its broker
// connection apart from its readiness, for the feed's status.
type feedConsumer interface {
	source
	Connected() bool
}

// feedSource is one path: its consumer, its name and what it delivered.
type feedSource struct {
	name   string
	src    feedConsumer
	proc   *FeedProcessor
	failed atomic.Pointer[error] // why its consumer stopped early; nil while it runs, or is run again
	// ad adopts the sessions on this path of the share group's gone
	// members; nil: none is adopted.
	ad *adopter
}

// newFeedsSource builds one MQTT consumer per feed, each passing its
// deliveries, named by its feed, to p. Where p has Submit and the store is
// a single owner's, each feed's consumer decides its next batch while one
// commits, and the engine's committer writes the feeds' waiting batches in
// one commit. On a shared store, whose commit is made inside Submit, the
// feeds' batches that wait are combined into one call instead
// (oneAtATime).
//
// With share.paths, each feed's consumer records in the group's store
// that it holds the share group's subscription on its path once the
// broker grants it (and that it may no longer, its connection lost), and,
// with met, adopts on its path the sessions of the group's gone members,
// through its own brokers (feedShare).
func newFeedsSource(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, p mqtt.Processor, share shareMembership, met *metrics.Adoptions) (*feedsSource, error) {
	names := make([]string, len(cfg.MQTT.Feeds))
	for i, f := range cfg.MQTT.Feeds {
		names[i] = f.Name
	}
	procs := FeedProcessors(p, names, m.FeedBehind, appliedAgain(log, m))
	s := &feedsSource{log: log}
	if len(procs) > 0 {
		s.one = procs[0].one
	}
	for i, f := range cfg.MQTT.Feeds {
		flog := log.With("feed", f.Name)
		mc := consumerBase(cfg, flog, m.Feed(f.Name)) // a feed has its password and TLS of its own, or mqtt's
		mc.Brokers, mc.ClientID, mc.Username = f.Brokers, f.ClientID, f.Username
		var err error
		if mc.Password, err = secretOf(fmt.Sprintf("mqtt.feeds[%d] (%s).password", i, f.Name), f.PasswordEnv, f.PasswordFile); err != nil {
			return nil, err
		}
		tlsCfg := cfg.MQTT.TLS
		if f.TLS != nil {
			tlsCfg = *f.TLS
		}
		if mc.TLS, err = clientTLS(tlsCfg); err != nil {
			return nil, fmt.Errorf("feed %s: %w", f.Name, err)
		}
		clock := &connClock{next: mc.Observer}
		if share.paths != nil {
			mc.JoinShare, mc.QuitShare = feedShare(share, f.Name, mc)
			mc.Hold = share.hold
			mc.Observer = clock
		}
		src, err := newMQTTSource(mqttprobe.Choice(f.Protocol), mc, feedProcessor(procs[i], cfg.Store.Shared()), flog)
		if err != nil {
			return nil, fmt.Errorf("feed %s: %w", f.Name, err)
		}
		src.setting = fmt.Sprintf("mqtt.feeds[%d]", i)
		fs := &feedSource{name: f.Name, src: src, proc: procs[i]}
		if share.paths != nil && met != nil && cfg.Store.Shared() {
			// On a shared store the feed's processor takes overlapping
			// calls (oneAtATime): the adoption's batches join the feeds'.
			fs.ad = &adopter{group: share.group, store: share.paths.PathAdopter(f.Name), every: share.claimTTL / 3, base: mc, proc: procs[i],
				ready: src.Ready, lostWait: share.lostWait, upFor: clock.upFor, consumer: src.adoption, log: flog, met: met, feed: f.Name}
		}
		s.feeds = append(s.feeds, fs)
	}
	return s, nil
}

// feedShare returns how the consumer of path (a feed's name, mc its
// configuration) records its share of the group on that path: the
// session's client id, the path's brokers (passwords redacted) and the
// group's filters.
func feedShare(share shareMembership, path string, mc mqtt.Config) (join, quit func(context.Context) error) {
	sp := engine.SharePath{Path: path, Group: share.group, ClientID: mc.ClientID, Brokers: redactedBrokers(mc.Brokers), Filters: sharedTopics(mc.Filters)}
	join = func(ctx context.Context) error { return share.paths.JoinSharePath(ctx, sp) }
	quit = func(ctx context.Context) error { return share.paths.QuitSharePath(ctx, path, share.group) }
	return join, quit
}

// sharedTopics are the topic filters of filters that are subscribed in
// the share group (not Unshared).
func sharedTopics(filters []mqtt.Filter) []string {
	out := []string{}
	for _, f := range filters {
		if !f.Unshared && !slices.Contains(out, f.Topic) {
			out = append(out, f.Topic)
		}
	}
	return out
}

// redactedBrokers are brokers with their passwords redacted.
func redactedBrokers(brokers []string) []string {
	out := make([]string, len(brokers))
	for i, b := range brokers {
		out[i] = b
		if u, err := url.Parse(b); err == nil {
			out[i] = u.Redacted()
		}
	}
	return out
}

// appliedAgain counts on m each twin applied again, and logs it: the
// first of each feed, then whenever its count doubles, so that a path
// trailing past the key window for hours does not flood the log.
func appliedAgain(log *slog.Logger, m *metrics.Metrics) func(feed, first string, d time.Duration) {
	var mu sync.Mutex
	counts := map[string]uint64{}
	return func(feed, first string, d time.Duration) {
		m.FeedAppliedAgain(feed)
		mu.Lock()
		counts[feed]++
		n := counts[feed]
		mu.Unlock()
		if n&(n-1) == 0 {
			log.Warn("a twin was applied again: its key had left the key window (window.ttl, window.max_entries) when this feed delivered it, after the other feed's copy was applied",
				"feed", feed, "first_feed", first, "behind", d, "applied_again", n)
		}
	}
}

// feedProcessor is what a feed's consumer passes its batches to: f with
// Submit where it has one, unless the store is shared (newFeedsSource).
func feedProcessor(f *FeedProcessor, shared bool) mqtt.Processor {
	if sub := f.Submitting(); sub != nil && !shared {
		return sub
	}
	return f
}

// Run runs every feed until ctx is done. A feed that returns early (its
// broker refused the subscription, or no version could be negotiated, as
// when its address closes each connection at once) is logged, reported
// down and run again after a pause that doubles up to feedRetryMax, while
// the others go on: a standby promoted on one path without the consumer's
// ACL, or a path's load balancer with no broker behind it for a while,
// must neither stop the path that works nor leave the consumer on one path
// until run restarts. Run returns nil when ctx is done, or every feed's
// error once they all failed at the same time.
func (s *feedsSource) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(s.feeds))
	var mu sync.Mutex
	failing, allFailed := 0, false
	var wg sync.WaitGroup
	defer s.adopt(ctx)()
	for i, f := range s.feeds {
		wg.Go(func() {
			pause, most := cmp.Or(s.retryMin, feedRetryMin), cmp.Or(s.retryMax, feedRetryMax)
			for {
				err := f.src.Run(ctx)
				if err == nil || ctx.Err() != nil {
					return
				}
				mu.Lock()
				ferr := fmt.Errorf("feed %s: %w", f.name, err)
				errs[i] = ferr
				f.failed.Store(&ferr)
				failing++
				if failing == len(s.feeds) {
					allFailed = true
					cancel()
				}
				mu.Unlock()
				s.log.Error("feed stopped: the other feeds go on without it; it is tried again", "feed", f.name, "err", err, "again_in", pause)
				select {
				case <-ctx.Done():
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, most)
				mu.Lock()
				failing--
				f.failed.Store(nil)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !allFailed {
		return nil // stopped: a feed that failed before was logged and reported
	}
	return errors.Join(errs...)
}

// adopt runs each feed's adoptions until ctx is done or the returned
// function is called, which stops them and waits for them: Run calls it
// once every feed's consumer has returned (adoptingSource).
func (s *feedsSource) adopt(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, f := range s.feeds {
		if f.ad != nil {
			wg.Go(func() { f.ad.Run(ctx) })
		}
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
