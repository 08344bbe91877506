package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
)

// defaultClaimTTL is how long a chain claim is taken to last when the
// store does not say (it declares no OutboxClaimer).
const defaultClaimTTL = 15 * time.Second

// groupStore is a shared store's members' chains, as audit retention
// (audit.ChainStore) and the audit sinks (sink.ChainStore) use them.
type groupStore struct {
	engine.QuarantineScanner
	engine.ChainScanner
	engine.ChainKeeper
}

// groupOf returns the chains of st, a shared store; false when it cannot
// trim them or keep the sinks' cursors on them.
func groupOf(st Store) (groupStore, bool) {
	caps := st.Capabilities()
	if caps.Shared == nil || caps.Chains == nil || caps.Keeper == nil {
		return groupStore{}, false
	}
	return groupStore{st, caps.Chains, caps.Keeper}, true
}

// chains runs audit retention and the audit sinks over the members' chains
// of a shared store that this process claims (engine.ChainKeeper): its
// member's own, and the chain of each member whose lease expired, until
// that member is back. claim renews the claims and hands the chains to the
// sinks and to retention; trim applies retention to each claimed chain,
// every chain with a Retention of its own, held back to the lowest cursor
// the sinks keep on it.
type chains struct {
	a      *App
	g      groupStore
	member string        // this process's member
	sinks  *sink.Set     // nil: no audit sinks
	retain bool          // audit.retention is on
	ttl    time.Duration // the claims' lifetime
	every  time.Duration // how often claim runs: a third of the claims' lifetime
	// stopFlush bounds how long Run, once ctx is done, lets the sinks
	// deliver what they have not before it releases the claims; 0: not
	// at all.
	stopFlush time.Duration
	// retained counts, under Run, the chains a retention pass failed on
	// and times the passes that failed on none; nil: not counted.
	retained *metrics.Retention
	// held says what the sinks keep of the chains beyond
	// audit.retention.max_records, under Run; nil: nothing says it.
	held *heldBySinks

	mu        sync.Mutex
	claimed   []string                    // as ClaimChains last answered, sorted
	claimedAt time.Time                   // when the ClaimChains that answered it began
	claimErr  error                       // why the last claim failed; nil once one succeeded
	trims     map[string]*audit.Retention // by member, of the claimed chains
	passes    map[string]*sync.Mutex      // by member: held while retention trims the chain
}

// chainWork returns the chains this process streams and trims on a shared
// store when audit.sinks or audit.retention is configured; nil otherwise.
// Call it on an app opened for writing, with Options.Sinks when there are
// sinks.
func (a *App) chainWork() (*chains, error) {
	ac := a.Config.Audit
	if !a.Config.Store.Shared() || (a.Sinks == nil && !ac.Retention.Enabled()) {
		return nil, nil
	}
	g, ok := groupOf(a.Store)
	if !ok || a.Engine == nil {
		return nil, fmt.Errorf("audit: the %s store cannot trim its members' chains or keep the sinks' cursors on them here", a.Config.Store.Kind)
	}
	if err := audit.CheckChainDir(a.Engine.Member()); ac.Retention.Enabled() && err != nil {
		return nil, fmt.Errorf("audit: %w; set store.member to an id without / or \\", err)
	}
	ttl := defaultClaimTTL
	if c := a.Store.Capabilities().Claims; c != nil && c.ClaimTTL() > 0 {
		ttl = c.ClaimTTL()
	}
	return &chains{a: a, g: g, member: a.Engine.Member(), sinks: a.Sinks, retain: ac.Retention.Enabled(),
		ttl: ttl, every: ttl / 3, trims: map[string]*audit.Retention{}, passes: map[string]*sync.Mutex{}}, nil
}

// Run claims the chains at once and then every c.every, streams the sinks
// over them and, every audit.retention.interval, runs retention, until
// ctx is done; then it waits for retention to stop, lets the sinks
// deliver what they can of the rest (finishAtStop) and releases its
// claims, so that another process takes the chains over at once.
func (c *chains) Run(ctx context.Context) {
	c.claim(ctx)
	streamCtx, stopStream := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStream()
	finish := func() error { return nil }
	if c.sinks != nil {
		finish = c.sinks.Stream(streamCtx, c.stopFlush)
	}
	var wg sync.WaitGroup
	if c.retain {
		wg.Go(func() { c.runRetention(ctx, time.Duration(c.a.Config.Audit.Retention.Interval)) })
	}
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			c.finishAtStop(context.WithoutCancel(ctx), finish, stopStream)
			c.releaseAll(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			c.claim(ctx)
		}
	}
}

// finishAtStop renews the claims and ends the sinks' stream: the batches
// in flight land, and the sinks deliver what they can of the rest of the
// claimed chains within c.stopFlush, and before a third of the claims'
// lifetime is left (stop cancels the stream then); the cursors keep the
// rest for whoever claims the chains next.
func (c *chains) finishAtStop(ctx context.Context, finish func() error, stop context.CancelFunc) {
	if c.sinks == nil {
		return
	}
	if c.stopFlush <= 0 {
		stop()
		finish()
		return
	}
	if err := c.claim(ctx); err != nil {
		stop() // logged
		finish()
		return
	}
	bound := time.AfterFunc(min(c.stopFlush, c.ttl-c.every), stop)
	defer bound.Stop()
	if err := finish(); err != nil {
		c.a.Log.Warn("audit sinks: what they could not deliver at stop waits behind their cursors", "err", err)
	}
}

// runRetention trims every claimed chain now and then every interval
// until ctx is done, logging and counting each chain a pass fails on (the
// next pass tries again); with no chain claimed because the store did not
// answer, the member's own chain.
func (c *chains) runRetention(ctx context.Context, every time.Duration) {
	retainEvery(ctx, every, c.a.Log, c.retained, c.held, func(ctx context.Context) ([]chainHeld, []error) {
		if err := c.unclaimed(); err != nil {
			return nil, []error{err}
		}
		res, errs := c.trimEach(ctx)
		found := make([]chainHeld, 0, len(res))
		for _, r := range res {
			found = append(found, chainHeld{chain: r.Member, held: r.Held, stale: !r.SinksRead})
		}
		return found, errs
	})
}

// claimFailed notes why a claim failed.
func (c *chains) claimFailed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimErr = err
}

// unclaimed says why this process trims no chain, its own included, when
// that is because the store did not answer: the claims lapsed (or were
// never made) and the last claim failed. A pass then fails on the
// member's own chain, rather than succeed over none. nil while chains are
// claimed, or when the store gave this process none (other processes hold
// them).
func (c *chains) unclaimed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claimed != nil || c.claimErr == nil {
		return nil
	}
	return fmt.Errorf("member %s's chain: not claimed, the store did not answer the claim: %w", c.member, c.claimErr)
}

// claim takes or renews the chain claims, hands the claimed chains to the
// sinks (each with its head as the store keeps it) and releases the
// chains no longer claimed. When the claims cannot be renewed, the last
// ones stand until a third of their lifetime is left, by this process's
// clock: then it stops streaming and trimming them, before another
// process may claim them. The error is logged and returned. The claims
// and the heads are read within c.every: a store that does not answer
// fails the renewal in time, and a stop is not held up by it.
func (c *chains) claim(ctx context.Context) error {
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.every)
	defer cancel()
	members, err := c.g.ClaimChains(rctx)
	if err != nil {
		if ctx.Err() == nil {
			c.claimFailed(err)
			c.a.Log.Warn("audit: cannot claim the members' chains to stream and trim; the last claims stand until they are about to expire", "err", err)
			c.lapse()
		}
		return err
	}
	heads, err := c.heads(rctx)
	if err != nil {
		if ctx.Err() == nil {
			c.claimFailed(err)
			c.a.Log.Warn("audit: cannot read the chains' heads; the sinks keep the chains they had", "err", err)
		}
		return err
	}
	given := make([]engine.Chain, len(members))
	for i, m := range members {
		given[i] = engine.Chain{Member: m, Head: heads[m]} // zero: no record yet
	}
	c.mu.Lock()
	before := c.claimed
	c.claimed, c.claimedAt, c.claimErr = members, began, nil
	for m := range c.trims {
		if !slices.Contains(members, m) {
			delete(c.trims, m)
		}
	}
	c.mu.Unlock()
	if c.sinks != nil {
		c.sinks.SetChains(given)
	}
	c.logChanges(ctx, before, members)
	return nil
}

// keepClaimed renews the claims every c.every until the returned stop is
// called and has waited for it, for a process that streams and trims the
// chains once rather than under Run (ingest): retention stops trimming a
// chain whose claim is no longer fresh, so a sink flush and passes that
// together outlast that would otherwise leave the chains as they were.
func (c *chains) keepClaimed(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(c.every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = c.claim(ctx) // a failure is logged; the claims stand until they are about to expire
			}
		}
	}()
	return func() { cancel(); <-done }
}

// owned reports whether member's chain is claimed with more than a third
// of the claim's lifetime left, by this process's clock: retention goes on
// archiving and trimming it only then.
func (c *chains) owned(member string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.claimed, member) && c.fresh()
}

// fresh reports whether the claims were renewed with more than a third of
// their lifetime left. Called with c.mu held.
func (c *chains) fresh() bool { return time.Since(c.claimedAt) < c.ttl-c.every }

// lapse gives up the chains, without releasing their claims, once the
// last renewal is too old for them to be owned: the sinks stop streaming
// them and retention stops trimming them.
func (c *chains) lapse() {
	c.mu.Lock()
	claimed := c.claimed
	if claimed == nil || c.fresh() {
		c.mu.Unlock()
		return
	}
	c.claimed = nil
	c.mu.Unlock()
	if c.sinks != nil {
		c.sinks.SetChains(nil)
	}
	c.a.Log.Warn("audit: the chain claims could not be renewed in time; no longer streaming and trimming them", "chains", claimed)
}

// waitPass waits until retention is not trimming member's chain: a pass
// on it stops at its next step once the chain is no longer owned.
func (c *chains) waitPass(member string) {
	mu := c.pass(member)
	mu.Lock()
	defer mu.Unlock()
}

// pass returns the lock retention holds while it trims member's chain.
func (c *chains) pass(member string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	mu := c.passes[member]
	if mu == nil {
		mu = &sync.Mutex{}
		c.passes[member] = mu
	}
	return mu
}

// heads reads every chain's head from the store.
func (c *chains) heads(ctx context.Context) (map[string]engine.AuditHead, error) {
	all, err := c.g.Chains(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: read the members' chain heads: %w", err)
	}
	out := make(map[string]engine.AuditHead, len(all))
	for _, ch := range all {
		out[ch.Member] = ch.Head
	}
	return out, nil
}

// logChanges releases the chains claimed before and no longer (the sinks
// were already taken off them, and their batches of them in hand ended),
// each once retention stopped trimming it, and says which chains it took
// and gave up.
func (c *chains) logChanges(ctx context.Context, before, now []string) {
	for _, m := range before {
		if slices.Contains(now, m) {
			continue
		}
		c.waitPass(m)
		rctx, cancel := context.WithTimeout(ctx, c.every)
		err := c.g.ReleaseChain(rctx, m)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.a.Log.Warn("audit: cannot release a chain claim; it expires by itself", "member", m, "err", err)
		}
		c.a.Log.Info("audit: no longer streaming and trimming a member's chain", "member", m, "own", m == c.member)
	}
	for _, m := range now {
		switch {
		case slices.Contains(before, m):
		case m == c.member:
			c.a.Log.Info("audit: streaming and trimming this member's chain", "member", m)
		default:
			c.a.Log.Info("audit: streaming and trimming the chain of a member whose lease expired", "member", m)
		}
	}
}

// releaseAll gives up every claim, within a few seconds; retention has
// stopped by then.
func (c *chains) releaseAll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c.mu.Lock()
	claimed := c.claimed
	c.claimed = nil
	c.mu.Unlock()
	if c.sinks != nil {
		c.sinks.SetChains(nil)
	}
	for _, m := range claimed {
		if err := c.g.ReleaseChain(ctx, m); err != nil {
			c.a.Log.Warn("audit: cannot release a chain claim; it expires by itself", "member", m, "err", err)
		}
	}
}

// chainTrim is what one pass of retention did to one member's chain.
type chainTrim struct {
	Member string
	audit.TrimResult
}

// trim applies retention once to each claimed chain, one after the other.
// A chain that fails does not stop the others; the errors are joined.
func (c *chains) trim(ctx context.Context) ([]chainTrim, error) {
	out, errs := c.trimEach(ctx)
	return out, errors.Join(errs...)
}

// trimEach is trim with the error of each chain that failed, one each.
func (c *chains) trimEach(ctx context.Context) ([]chainTrim, []error) {
	if !c.retain {
		return nil, nil
	}
	c.mu.Lock()
	claimed := c.claimed
	c.mu.Unlock()
	var out []chainTrim
	var errs []error
	for _, m := range claimed {
		r, err := c.retention(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s's chain: %w", m, err))
			continue
		}
		mu := c.pass(m)
		mu.Lock()
		res, err := r.Once(ctx)
		mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s's chain: %w", m, err))
		}
		out = append(out, chainTrim{Member: m, TrimResult: res})
	}
	return out, errs
}

// retention returns the Retention of member's chain, made the first time.
func (c *chains) retention(member string) (*audit.Retention, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.trims[member]; r != nil {
		return r, nil
	}
	ac := c.a.Config.Audit
	r, err := audit.NewChainRetention(c.g, audit.RetentionOptions{
		Archive:    ac.Archive,
		Member:     member,
		MaxAge:     time.Duration(ac.Retention.MaxAge),
		MaxRecords: uint64(ac.Retention.MaxRecords),
		Head: func(ctx context.Context) (uint64, error) {
			heads, err := c.heads(ctx)
			return heads[member].Position, err
		},
		Cursors: func(ctx context.Context, head uint64) (map[string]uint64, error) {
			return c.trimCursors(ctx, member, head)
		},
		Owned:  func() bool { return c.owned(member) },
		Ages:   c.a.ages,
		Logger: c.a.Log,
	})
	if err != nil {
		return nil, err
	}
	c.trims[member] = r
	return r, nil
}

// trimCursors are the cursors retention holds member's chain, whose head
// is head, back to, by sink: those of this process's sinks on it and
// every cursor the store keeps on it, those of sinks other members
// configure (which stream it when it is theirs) and of sinks removed from
// every configuration included (sinkCursorsOf), so that a record leaves
// only once every sink delivered it, until an operator forgets a sink
// that is gone.
func (c *chains) trimCursors(ctx context.Context, member string, head uint64) (map[string]uint64, error) {
	cursors := map[string]uint64{}
	var configured []string
	if c.sinks != nil {
		var err error
		if cursors, err = c.sinks.Cursors(ctx, member); err != nil {
			return nil, err
		}
		for _, st := range c.sinks.Status() {
			configured = append(configured, st.Name)
		}
	}
	stored, err := c.g.ChainCursors(ctx, member)
	if err != nil {
		return nil, fmt.Errorf("read the sinks' cursors on the chain: %w", err)
	}
	return sinkCursorsOf(c.a.Log, head, member, cursors, stored, configured), nil
}
