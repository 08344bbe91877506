package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/web"
)

// checkRun refuses a configuration run cannot start with and logs its
// warnings, and a key window shorter than the broker's redeliveries.
func checkRun(cfg *config.Config, log *slog.Logger) error {
	if err := cfg.ValidateRun(); err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		if w.Line > 0 {
			log.Warn("configuration", "warning", w.String(), "line", w.Line)
		} else {
			log.Warn("configuration", "warning", w.String())
		}
	}
	switch ttl, exp := time.Duration(cfg.Window.TTL), time.Duration(cfg.MQTT.SessionExpiry); {
	case cfg.Input == config.InputJetStream:
	case cfg.MQTT.Protocol == config.ProtocolMQTT311: // the session's life is the broker's setting
		if slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return r.ID != "" }) {
			log.Warn("mqtt.protocol 3.1.1: the broker keeps the session as long as its own setting says (Mosquitto persistent_client_expiration, for ever unless set), not mqtt.session_expiry: "+
				"a replay arriving after its key left the window cannot be caught on id routes; keep window.ttl above that setting plus a retry margin",
				"ttl", ttl, "margin", ttlMargin)
		}
	case ttl < exp+ttlMargin:
		log.Warn("window.ttl is shorter than mqtt.session_expiry plus a retry margin: a replay arriving after its key left the window cannot be caught on id routes",
			"ttl", ttl, "session_expiry", exp, "margin", ttlMargin)
	}
	return nil
}

// routeNames are the configured routes' names, the metrics' route labels.
func routeNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Routes))
	for i, r := range cfg.Routes {
		names[i] = r.Name
	}
	return names
}

// daemon is `replayguard run` once its app is open and wired: the
// consumer, and what serve runs beside it.
type daemon struct {
	app       *App
	log       *slog.Logger
	reg       *prometheus.Registry
	consumer  source
	retention *audit.Retention // nil when audit.retention is off, or on a shared store
	chains    *chains          // a shared store's chains, when audit.retention or audit.sinks is on
	// held is what the last retention pass found the audit sinks keep
	// beyond audit.retention.max_records; nil until retention runs.
	held      atomic.Pointer[heldBySinks]
	server    *web.Server   // nil without http.listen
	listener  net.Listener  // the server's, bound before serve
	sinkFlush time.Duration // how long the audit sinks may deliver, once the consumer stopped, what they have not
}

// ready reports whether the member takes and acknowledges deliveries: the
// source connected and committing, room in the outbox, the shared store
// answering its checks with the lease renewed (App.storeError), and no
// acknowledged commits found lost by the shared store. /readyz and
// replayguard_ready both answer from it, so they never disagree. It is
// safe from any goroutine and does not block.
func (d *daemon) ready() bool {
	a := d.app
	return d.consumer.Ready() && (a.Forward == nil || !a.Forward.Status().Full) && a.storeError() == nil && a.Engine.Loss() == nil
}

// feedStatus is the redundant feeds' state for the API, or nil with one
// path.
func (d *daemon) feedStatus() func() []web.FeedStatus {
	if f, ok := d.consumer.(*feedsSource); ok {
		return f.Status
	}
	return nil
}

// newServer builds the HTTP API and dashboard over the app, or returns nil
// when http.listen is not set. /readyz answers from d.ready; storeStatus
// adds why the outbox or the shared store holds it back.
func (d *daemon) newServer(build Build, hub *web.Hub, storeStatus func() web.StoreStatus) (*web.Server, error) {
	a, h := d.app, d.app.Config.HTTP
	if !h.Enabled() {
		return nil, nil
	}
	if a.Config.Audit.Retention.Enabled() { // an audit sink that keeps records beyond max_records
		storeStatus = withWarning(storeStatus, func() string { return d.held.Load().warning() })
	}
	tokens, err := HTTPTokens(h)
	if err != nil {
		return nil, err
	}
	return web.New(web.Config{Listen: h.Listen, CertFile: h.TLS.CertFile, KeyFile: h.TLS.KeyFile,
		ClientCAFile: h.TLS.CAFile, Tokens: tokens, AuthReads: h.AuthReads, Version: build.Version,
		StoreReadTimeout: a.Config.Store.ReadTimeout.Std(), Logger: d.log},
		web.Deps{Engine: a.Engine, Audit: a.Store, Quarantine: a.Store, Gatherer: d.reg, Ready: d.ready, Hub: hub, Store: storeStatus,
			Outbox: a.Engine, Forward: a.ForwardStatus(), Loss: a.lossReviewer(), Feeds: d.feedStatus(),
			Explain: a.Explain}), nil
}

// Explain answers /api/v1/explain/{entity} (web.Deps.Explain): the
// entity's lineage from the audit log the store keeps and the archive,
// in the same words as `replayguard explain` when it has none.
func (a *App) Explain(ctx context.Context, q web.ExplainQuery) (any, error) {
	ls, err := StoreLineages(ctx, a.Store, a.Config.Audit.Archive,
		report.LineageOptions{Entities: []string{q.Entity}, Field: q.Field, At: q.At})
	if err != nil {
		return nil, err
	}
	if len(ls[0].Changes) == 0 {
		return nil, fmt.Errorf("%w: %v", web.ErrNoLineage, explainNone(ls[0]))
	}
	return ls[0], nil
}

// serve runs the consumer until ctx is done or it returns, with the
// forward drainer, the shared store's check, audit retention, the audit
// sinks (on a shared store both over the chains this member claims) and
// the HTTP server beside it. It stops the consumer first (which
// commits and acknowledges what is in hand), the drainer and the audit
// sinks after it (they deliver what they can of the rest within
// d.sinkFlush), and waits for every goroutine before it returns, so that
// the store closes last.
func (d *daemon) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The drainer outlives the consumer's stop: the deliveries in hand may
	// wait for room in the outbox while the consumer commits them.
	stopForward := d.startForward(context.WithoutCancel(ctx))
	defer stopForward()
	// So do the audit sinks: what the consumer commits as it stops is
	// theirs to deliver too.
	sinksCtx, stopSinks := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSinks()
	var g goroutines
	d.startStoreCheck(ctx, &g, cancel)
	d.startRetention(ctx, &g)
	d.startSinks(sinksCtx, &g)
	d.startChains(sinksCtx, &g)
	d.startServer(ctx, &g, cancel)
	err := d.consumer.Run(ctx)
	cancel()
	stopSinks()
	stopForward()
	return errors.Join(err, g.Wait())
}

// startForward runs the forward drainer until stop; it is stopped after
// the consumer and waited for before the store closes.
func (d *daemon) startForward(ctx context.Context) (stop func()) {
	stop = d.app.startForward(ctx)
	if d.app.Forward != nil {
		cfg := d.app.Config
		d.log.Info("forwarding on", "outputs", strings.Join(cfg.OutputKinds(), ","), "outbox_max_entries", cfg.Outbox.MaxEntries)
	}
	return stop
}

// startStoreCheck compares a shared store's chain head with the journal's
// until ctx is done; when another process took the member's lease, cancel
// stops the daemon.
func (d *daemon) startStoreCheck(ctx context.Context, g *goroutines, cancel context.CancelFunc) {
	if !d.app.Config.Store.Shared() {
		return
	}
	g.Go(func() error {
		err := d.app.CheckStore(ctx)
		if err != nil {
			d.log.Error("stopping: the store no longer lets this process write as its member", "err", err)
			cancel()
		}
		return err
	})
}

// startRetention trims the audit log every audit.retention.interval until
// ctx is done, the passes that fail counted in the metrics.
func (d *daemon) startRetention(ctx context.Context, g *goroutines) {
	if d.retention == nil {
		return
	}
	ac, m := d.app.Config.Audit, metrics.NewRetention(d.reg)
	held := newHeldBySinks(d.log, uint64(ac.Retention.MaxRecords), sinkNames(d.app.Config))
	d.held.Store(held)
	g.Go(func() error {
		retainEvery(ctx, time.Duration(ac.Retention.Interval), d.log, m, held, func(ctx context.Context) ([]chainHeld, []error) {
			res, err := d.retention.Once(ctx)
			var found []chainHeld // nil: the pass read no cursor, and the last pass's finding stands
			if res.SinksRead {
				found = []chainHeld{{held: res.Held}}
			}
			if err != nil {
				return found, []error{err}
			}
			return found, nil
		})
		return nil
	})
	d.log.Info("audit retention on", "archive", ac.Archive, "max_age", ac.Retention.MaxAge,
		"max_records", ac.Retention.MaxRecords, "interval", ac.Retention.Interval)
}

// startSinks delivers the audit log to the audit sinks until ctx is done,
// their state in the metrics, then what they can of the rest within
// d.sinkFlush.
func (d *daemon) startSinks(ctx context.Context, g *goroutines) {
	if d.app.Sinks == nil {
		return
	}
	d.reg.MustRegister(d.app.Sinks)
	if d.chains == nil { // else they run over the claimed chains (startChains)
		g.Go(func() error {
			d.streamSinks(ctx)
			return nil
		})
	}
	d.log.Info("audit sinks on", "sinks", len(d.app.Config.Audit.Sinks))
}

// streamSinks delivers to the audit sinks until ctx is done, then what
// they can of the rest within d.sinkFlush: the batches in flight at the
// stop land rather than being sent again, and the cursors keep what is
// left for the next run or ingest.
func (d *daemon) streamSinks(ctx context.Context) {
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	finish := d.app.Sinks.Stream(streamCtx, d.sinkFlush)
	<-ctx.Done()
	if d.sinkFlush <= 0 {
		cancel()
		finish()
		return
	}
	bound := time.AfterFunc(d.sinkFlush, cancel)
	defer bound.Stop()
	if err := finish(); err != nil {
		d.log.Warn("audit sinks: what they could not deliver at stop waits behind their cursors", "err", err)
	}
}

// startChains streams and trims the members' chains of a shared store that
// this member claims until ctx is done, then delivers what the sinks can
// of the rest within d.sinkFlush and releases them.
func (d *daemon) startChains(ctx context.Context, g *goroutines) {
	if d.chains == nil {
		return
	}
	d.chains.stopFlush = d.sinkFlush
	if d.chains.retain {
		d.chains.retained = metrics.NewRetention(d.reg)
		d.chains.held = newHeldBySinks(d.log, uint64(d.app.Config.Audit.Retention.MaxRecords), sinkNames(d.app.Config))
		d.held.Store(d.chains.held)
	}
	g.Go(func() error { d.chains.Run(ctx); return nil })
	if ac := d.app.Config.Audit; ac.Retention.Enabled() {
		d.log.Info("audit retention on, chain by chain", "archive", ac.Archive, "max_age", ac.Retention.MaxAge,
			"max_records", ac.Retention.MaxRecords, "interval", ac.Retention.Interval)
	}
}

// startServer serves the HTTP API and dashboard until ctx is done; when
// the server fails, cancel stops the daemon.
func (d *daemon) startServer(ctx context.Context, g *goroutines, cancel context.CancelFunc) {
	if d.server == nil {
		return
	}
	g.Go(func() error {
		if err := d.server.Serve(ctx, d.listener); err != nil {
			cancel()
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	d.log.Info("serving the API and dashboard", "url", d.app.Config.HTTP.Scheme()+"://"+d.listener.Addr().String()+"/")
}

// goroutines are the daemon's goroutines beside the consumer: each stops
// when the daemon's context is done, and Wait waits for them all.
type goroutines struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// Go runs f in a goroutine; its error, if any, is Wait's.
func (g *goroutines) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	})
}

// Wait waits for every goroutine and joins their errors.
func (g *goroutines) Wait() error {
	g.wg.Wait()
	return errors.Join(g.errs...)
}
