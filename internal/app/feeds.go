package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/mqttprobe"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/web"
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

// feedSource is one path: its consumer, its name and what it delivered.
type feedSource struct {
	name   string
	src    source
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
		deliveries, first, dups := f.proc.Counts()
		out[i] = web.FeedStatus{Name: f.name, Connected: f.src.Ready(), Deliveries: deliveries, First: first, Duplicates: dups,
			AppliedAgain: f.proc.AppliedAgain(), BehindSeconds: f.proc.Behind().Seconds()}
	}
	return out
}

// FeedProcessor is one feed's processor (FeedProcessors): it names its
// feed on each delivery and passes the batch on, counting what the feed's
// deliveries were decided.
type FeedProcessor struct {
	name string
	one  *oneAtATime
	// deliveries counts the deliveries committed, once each (a batch that
	// failed is counted when it is passed again and commits); first and
	// duplicates their decisions.
	deliveries, first, duplicates atomic.Uint64
	// again counts the twins applied again: their key had left the key
	// window when they came, after the other feed's copy was applied.
	again  atomic.Uint64
	behind atomic.Int64 // nanoseconds: the last twin's delay behind the other feed's copy
}

// FeedProcessors returns one processor per feed of names, all passing
// their batches to p one at a time: each feed's consumer calls its own
// from its own goroutine, and p's calls must not overlap. behind, when not
// nil, is told how long after the other feed's copy each twin arrived;
// again, when not nil, of each twin applied again (AppliedAgain), with the
// feed whose copy was applied first.
func FeedProcessors(p mqtt.Processor, names []string, behind func(feed string, d time.Duration), again func(feed, first string, d time.Duration)) []*FeedProcessor {
	one := &oneAtATime{p: p, firsts: newArrivals(recentArrivals), behind: behind, again: again}
	out := make([]*FeedProcessor, len(names))
	for i, name := range names {
		out[i] = &FeedProcessor{name: name, one: one}
	}
	return out
}

// Process names the feed on msgs and passes them on.
func (f *FeedProcessor) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	for i := range msgs {
		msgs[i].Feed = f.name
	}
	ds, err := f.one.Process(ctx, f, msgs)
	if err != nil {
		return ds, err
	}
	f.count(ds)
	return ds, nil
}

// submitter is a processor that decides a batch at once and commits it
// behind the batches submitted before it (*engine.Engine, see
// engine.Engine.SubmitLanded).
type submitter interface {
	SubmitLanded(ctx context.Context, msgs []engine.Message) (landed <-chan struct{}, wait func() ([]engine.Decision, error), err error)
}

// SubmittingFeed is a FeedProcessor with SubmitLanded: its feed's
// consumer decides the next batch while one commits.
type SubmittingFeed struct{ *FeedProcessor }

// Submitting returns f with SubmitLanded, or nil when the processor it passes
// its batches to has none. Each feed's batches commit in the order its
// consumer submits them; the feeds' batches in the order they reach the
// engine. A commit that fails fails every batch submitted after it, from
// either feed, and each feed's consumer commits its own again.
func (f *FeedProcessor) Submitting() *SubmittingFeed {
	if _, ok := f.one.p.(submitter); !ok {
		return nil
	}
	return &SubmittingFeed{f}
}

// SubmitLanded names the feed on msgs and submits them; landed is closed
// once their commit is durable or failed, and wait returns their
// decisions, or the failure.
func (s *SubmittingFeed) SubmitLanded(ctx context.Context, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	f := s.FeedProcessor
	for i := range msgs {
		msgs[i].Feed = f.name
	}
	return f.one.submit(ctx, f, msgs)
}

// count counts a committed batch's decisions.
func (f *FeedProcessor) count(ds []engine.Decision) {
	var first, dups uint64
	for _, d := range ds {
		switch {
		case d.Outcome.Effective():
			first++
		case d.Outcome == engine.Duplicate:
			dups++
		}
	}
	f.deliveries.Add(uint64(len(ds)))
	f.first.Add(first)
	f.duplicates.Add(dups)
}

// Prepare decodes ahead of Process when the processor can: each feed's
// consumer calls it on its own goroutine.
func (f *FeedProcessor) Prepare(msgs []engine.Message) {
	for i := range msgs {
		msgs[i].Feed = f.name
	}
	if p, ok := f.one.p.(interface{ Prepare([]engine.Message) }); ok {
		p.Prepare(msgs)
	}
}

// Counts returns the deliveries committed, those decided first (applied
// or applied late) and those decided duplicate.
func (f *FeedProcessor) Counts() (deliveries, first, duplicates uint64) {
	return f.deliveries.Load(), f.first.Load(), f.duplicates.Load()
}

// AppliedAgain counts the twins this feed delivered that were applied
// although the other feed's copy was applied before: their key had left
// the key window (window.ttl, window.max_entries) when they came. Only a
// twin whose first copy is among the last recentArrivals applied is seen.
func (f *FeedProcessor) AppliedAgain() uint64 { return f.again.Load() }

// Behind is how long after the other feed's copy the last twin this feed
// delivered arrived; 0 before any.
func (f *FeedProcessor) Behind() time.Duration { return time.Duration(f.behind.Load()) }

// recentArrivals bounds the keys whose first arrival a twin is timed
// against: a twin that comes later than that many messages after its first
// copy is not timed.
const recentArrivals = 1 << 16

// arrivals remembers which feed delivered each recent key first, and when.
type arrivals struct {
	at   map[engine.Hash]arrival
	ring []engine.Hash // insertion order, for eviction
	next int
}

type arrival struct {
	feed *FeedProcessor
	at   time.Time
	slot int // its place in ring: a key added again has a newer one
}

func newArrivals(n int) *arrivals {
	return &arrivals{at: make(map[engine.Hash]arrival, n), ring: make([]engine.Hash, n)}
}

func (a *arrivals) add(key engine.Hash, x arrival) {
	if old := a.ring[a.next]; !old.IsZero() && a.at[old].slot == a.next {
		delete(a.at, old)
	}
	a.ring[a.next] = key
	x.slot = a.next
	a.at[key] = x
	a.next = (a.next + 1) % len(a.ring)
}

// oneAtATime passes the feeds' batches to the engine one call at a time,
// and combines into one call the batches that arrive while another is
// being committed: the twin of a message usually arrives in the other
// feed's batch at the same moment, and one commit (one fsync) then decides
// both. The first caller that finds the engine idle commits what is
// waiting, its own batch first; the callers it committed for return with
// their decisions, and one that arrived meanwhile commits next.
//
// Batches submitted (submit) bypass the combining: the engine's committer
// writes the batches that wait for it in one commit itself.
type oneAtATime struct {
	p      mqtt.Processor
	failed atomic.Pointer[error] // the last call's error; nil when it succeeded
	mu     sync.Mutex
	busy   bool
	queue  []*feedBatch
	// landing holds the batches submitted and not yet timed, in the
	// engine's order (submitMu keeps it that of the Submit calls); a batch
	// is timed once it and every one before it has landed.
	submitMu sync.Mutex
	landing  []*feedBatch
	// timeMu guards landing and firsts, which with behind times each twin
	// against its first copy.
	timeMu sync.Mutex
	firsts *arrivals
	behind func(feed string, d time.Duration)
	again  func(feed, first string, d time.Duration)
}

// feedBatch is one feed's Process call, waiting to be committed.
type feedBatch struct {
	feed *FeedProcessor
	at   time.Time // when the feed passed it: its deliveries' arrival
	ctx  context.Context
	msgs []engine.Message
	ds   []engine.Decision
	err  error
	// wake says the batch was committed (done), or that its caller is to
	// commit what waits.
	wake chan struct{}
	done bool // committed by another caller; submitted: landed
}

func (o *oneAtATime) Process(ctx context.Context, feed *FeedProcessor, msgs []engine.Message) ([]engine.Decision, error) {
	b := &feedBatch{feed: feed, at: time.Now(), ctx: ctx, msgs: msgs, wake: make(chan struct{}, 1)}
	o.mu.Lock()
	o.queue = append(o.queue, b)
	if o.busy {
		o.mu.Unlock()
		// No giving up on ctx here: the committing caller's Process
		// returns when its own context is done, and wakes this one.
		<-b.wake
		if b.done {
			return b.ds, b.err
		}
	} else {
		o.busy = true
		o.mu.Unlock()
	}
	o.mu.Lock()
	batches := o.queue
	o.queue = nil
	o.mu.Unlock()
	o.commit(batches)
	o.mu.Lock()
	if len(o.queue) > 0 {
		o.queue[0].wake <- struct{}{} // its caller commits next
	} else {
		o.busy = false
	}
	o.mu.Unlock()
	return b.ds, b.err
}

// commit decides batches in one Process call, in order, and gives each its
// decisions; the messages go back to their callers as Process left them
// (a message keeps what an earlier attempt committed of it).
func (o *oneAtATime) commit(batches []*feedBatch) {
	msgs := batches[0].msgs
	if len(batches) > 1 {
		n := 0
		for _, b := range batches {
			n += len(b.msgs)
		}
		msgs = make([]engine.Message, 0, n)
		for _, b := range batches {
			msgs = append(msgs, b.msgs...)
		}
	}
	// The call runs under a batch's context that is not done: each feed
	// stops on its own context and drains under another, and a draining
	// feed's batch combined behind a stopped feed's must not fail with it
	// (a failed commit reported, the drain held for a retry).
	ctx := batches[0].ctx
	for _, b := range batches {
		if b.ctx.Err() == nil {
			ctx = b.ctx
			break
		}
	}
	ds, err := o.p.Process(ctx, msgs)
	if err == nil {
		o.failed.Store(nil)
	} else {
		o.fail(ctx, err)
	}
	at := 0
	for _, b := range batches {
		if len(batches) > 1 {
			copy(b.msgs, msgs[at:at+len(b.msgs)])
		}
		if err == nil {
			b.ds = ds[at : at+len(b.msgs) : at+len(b.msgs)]
		}
		b.err = err
		at += len(b.msgs)
	}
	if err == nil {
		o.timeMu.Lock()
		o.time(batches)
		o.timeMu.Unlock()
	}
	for _, b := range batches[1:] {
		b.done = true
		b.wake <- struct{}{}
	}
}

// submit submits a feed's batch to the engine; wait returns its
// decisions once it has landed, and counts and times them.
func (o *oneAtATime) submit(ctx context.Context, feed *FeedProcessor, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	b := &feedBatch{feed: feed, at: time.Now(), ctx: ctx}
	o.submitMu.Lock()
	landed, wait, err := o.p.(submitter).SubmitLanded(ctx, msgs)
	if err == nil {
		o.timeMu.Lock()
		o.landing = append(o.landing, b)
		o.timeMu.Unlock()
	}
	o.submitMu.Unlock()
	if err != nil {
		o.fail(ctx, err)
		return nil, nil, err
	}
	return landed, func() ([]engine.Decision, error) {
		ds, err := wait()
		o.land(b, ds, err)
		if err != nil {
			return nil, err
		}
		feed.count(ds)
		return ds, nil
	}, nil
}

// land marks b landed and takes every landed batch at the head of
// landing, in order: the last one's outcome is the feeds' last commit's,
// and the twins are timed in the order the engine decided them.
func (o *oneAtATime) land(b *feedBatch, ds []engine.Decision, err error) {
	o.timeMu.Lock()
	defer o.timeMu.Unlock()
	b.ds, b.err, b.done = ds, err, true
	n := 0
	for n < len(o.landing) && o.landing[n].done {
		n++
	}
	for _, l := range o.landing[:n] {
		if l.err != nil {
			o.fail(l.ctx, l.err)
		} else {
			o.failed.Store(nil)
		}
	}
	o.time(o.landing[:n])
	o.landing = slices.Delete(o.landing, 0, n)
}

// fail notes a commit's error, unless it is ctx's: a stop.
func (o *oneAtATime) fail(ctx context.Context, err error) {
	if ctx.Err() == nil {
		o.failed.Store(&err)
	}
}

// time notes the first copy of each message applied, and times each twin
// against the other feed's copy; it passes over a batch that failed. A
// twin applied (its key had left the key window) is counted as applied
// again, on its feed. Called with timeMu held.
func (o *oneAtATime) time(batches []*feedBatch) {
	for _, b := range batches {
		if b.err != nil {
			continue
		}
		for i := range b.ds {
			d := &b.ds[i]
			if d.Key.IsZero() || !d.Outcome.Effective() && d.Outcome != engine.Duplicate {
				continue
			}
			first, twin := o.firsts.at[d.Key]
			twin = twin && first.feed != b.feed
			if d.Outcome.Effective() && !twin { // a twin applied again keeps its first copy's arrival
				o.firsts.add(d.Key, arrival{feed: b.feed, at: b.at})
			}
			if !twin {
				continue
			}
			late := max(0, b.at.Sub(first.at))
			b.feed.behind.Store(int64(late))
			if o.behind != nil {
				o.behind(b.feed.name, late)
			}
			if d.Outcome.Effective() {
				b.feed.again.Add(1)
				if o.again != nil {
					o.again(b.feed.name, first.feed.name, late)
				}
			}
		}
	}
}
