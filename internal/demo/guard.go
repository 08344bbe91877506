package demo

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/web"
)

// cleanFilter is what the clean stream's subscribers subscribe to: every
// topic the incident route's forward effect publishes to, under
// cleanPrefix.
const (
	cleanFilter = "clean/#"
	cleanPrefix = "clean/"
)

// guard is replayguard consuming the same feed, opened the way `run`
// opens it (internal/app: the embedded store, the engine, and where the
// story forwards, the forward effect's drainer and its MQTT output), with
// source/mqtt's consumer over the engine, observed by the metrics and the
// dashboard's hub.
type guard struct {
	app      *app.App
	cfg      *config.Config
	store    app.Store
	eng      *engine.Engine
	consumer runner // source/mqtt's consumer, or feeds
	feeds    feeds  // the paths of mqtt.feeds; nil on one path
	hub      *web.Hub
	reg      *prometheus.Registry
	metrics  *metrics.Metrics
	tally    *tally

	cancel  context.CancelFunc
	done    chan error
	running atomic.Bool // the consumer runs: between start and stop

	stopForward context.CancelFunc
	forwardDone chan struct{}
}

type guardConfig struct {
	yaml    string   // the story's configuration, with ${DEMO_*} variables
	dir     string   // the store's directory
	brokers []string // the consumer's: the dispatch links to primary and standby, or to paths a and b
	cop     string   // the broker the clean stream is published to; "" for none
	version string
	retry   time.Duration // first reconnect delay
	log     *slog.Logger
}

// configVars are the values of the configuration's ${DEMO_*} variables.
func (cfg guardConfig) configVars() func(string) (string, bool) {
	vars := map[string]string{"DEMO_STORE": cfg.dir, "DEMO_PRIMARY_LINK": cfg.brokers[0],
		"DEMO_STANDBY_LINK": cfg.brokers[1], "DEMO_PATH_A_LINK": cfg.brokers[0], "DEMO_PATH_B_LINK": cfg.brokers[1],
		"DEMO_COP_BROKER": cfg.cop}
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func openGuard(ctx context.Context, cfg guardConfig, t *tally) (*guard, error) {
	c, err := config.Parse([]byte(cfg.yaml), "demo configuration", cfg.configVars())
	if err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	g := &guard{cfg: c, hub: web.NewHub(), reg: prometheus.NewRegistry(), tally: t}
	names := make([]string, len(c.Routes))
	for i, r := range c.Routes {
		names[i] = r.Name
	}
	m := metrics.New(g.reg, cfg.version, "", names...)
	opts := app.Options{Logger: cfg.log, Observer: engineObservers{g.hub, m, tallyObserver{t}}, Member: c.MQTT.ClientID}
	var fm *metrics.Forward
	if kinds := c.ForwardKinds(); len(kinds) > 0 {
		fm = metrics.NewForward(g.reg, kinds...)
		opts.ForwardObserver = fm
	}
	a, err := app.Open(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	g.app, g.store, g.eng, g.metrics = a, a.Store, a.Engine, m
	m.Watch(g.eng)
	m.WatchQuarantine(g.store)
	if a.Forward != nil {
		fm.WatchOutbox(a.Forward)
	}
	if len(c.MQTT.Feeds) > 0 {
		err = g.openFeeds(cfg, m)
	} else {
		mc := consumerConfig(c, cfg)
		mc.Observer = consumerObservers{m, tallyObserver{t}}
		g.consumer, err = mqtt.New(mc, g.eng)
	}
	if err != nil {
		g.close()
		return nil, err
	}
	m.WatchReady(g.ready) // what /readyz answers, as run's replayguard_ready
	g.startForward()
	return g, nil
}

// consumerConfig is the consumer's configuration on the brokers of mqtt
// (a feed sets its own brokers, client id and observer).
func consumerConfig(c *config.Config, cfg guardConfig) mqtt.Config {
	r := c.Routes[0]
	filters := []mqtt.Filter{{Topic: r.Topic, QoS: 1}}
	if r.Kind == config.RouteSparkplug { // as run subscribes it: the types it decides alone
		filters = filters[:0]
		for _, topic := range sparkplug.Subscriptions(r.Topic) {
			filters = append(filters, mqtt.Filter{Topic: topic, QoS: 1})
		}
	}
	return mqtt.Config{
		Brokers:         c.MQTT.Brokers,
		ClientID:        c.MQTT.ClientID,
		SessionExpiry:   time.Duration(c.MQTT.SessionExpiry),
		Filters:         filters,
		ConnectRetryMin: cfg.retry,
		ConnectRetryMax: 4 * cfg.retry,
		ConnectTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		Logger:          cfg.log,
	}
}

// openFeeds builds a consumer per path of mqtt.feeds, each its own
// session, counted under its feed's name in the metrics.
func (g *guard) openFeeds(cfg guardConfig, m *metrics.Metrics) error {
	names := make([]string, len(g.cfg.MQTT.Feeds))
	for i, f := range g.cfg.MQTT.Feeds {
		names[i] = f.Name
	}
	procs := app.FeedProcessors(g.eng, names, m.FeedBehind, nil) // as run passes each feed's batches
	for i, f := range g.cfg.MQTT.Feeds {
		gf := &guardFeed{name: f.Name, clientID: f.ClientID, proc: procs[i]}
		mc := consumerConfig(g.cfg, cfg)
		mc.Brokers, mc.ClientID = f.Brokers, f.ClientID
		mc.Logger = cfg.log.With("feed", f.Name)
		mc.Observer = consumerObservers{m.Feed(f.Name), receiptObserver{g.tally}, gf}
		c, err := mqtt.New(mc, procs[i])
		if err != nil {
			return fmt.Errorf("feed %s: %w", f.Name, err)
		}
		gf.consumer = c
		g.feeds = append(g.feeds, gf)
	}
	g.consumer = g.feeds
	return nil
}

// clientID is the consumer's: its session on the brokers.
func (g *guard) clientID() string { return g.cfg.MQTT.ClientID }

// startForward runs the drainer, if the story forwards, until
// stopForward: it publishes each applied report, after its commit, to the
// clean stream.
func (g *guard) startForward() {
	if g.app.Forward == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stopForward, g.forwardDone = cancel, make(chan struct{})
	go func() {
		defer close(g.forwardDone)
		g.app.RunForward(ctx)
	}()
}

// drainForward waits until every forward entry committed so far has its
// PUBACK from the COP broker (none to wait for when the story does not
// forward).
func (g *guard) drainForward(ctx context.Context) error {
	if g.app.Forward == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	_, err := g.app.Forward.Drain(dctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("%w: waited %v for the outbox to drain: %w", ErrStalled, stepTimeout, err)
}

// forwarded is how many entries the COP broker acknowledged.
func (g *guard) forwarded() uint64 {
	if g.app.Forward == nil {
		return 0
	}
	var n uint64
	for _, o := range g.app.Forward.Status().Outputs {
		n += o.Delivered
	}
	return n
}

// storeStatus tells /readyz why replayguard is not ready, as `run` does:
// its consumer stopped (the stories over, the dashboard held), no broker
// path connected, a full outbox; and what to warn of: a feed down while
// the other path consumes, a failing output.
func (g *guard) storeStatus() web.StoreStatus {
	var st web.StoreStatus
	if g.app.Forward != nil {
		fs := g.app.Forward.Status()
		st = web.StoreStatus{Error: fs.Blocked(), Warning: fs.Warning()}
	}
	switch {
	case st.Error != "":
	case !g.running.Load():
		st.Error = "replayguard's consumer is stopped: the demo's stories are over (its dashboard stays up while it holds)"
	default:
		st.Error = g.consumer.NotReady()
	}
	if g.feeds != nil && g.running.Load() {
		st.Warning = strings.Join(slices.DeleteFunc([]string{g.feeds.warning(), st.Warning}, func(s string) bool { return s == "" }), "; ")
	}
	return st
}

// feedStatus reports the paths of mqtt.feeds for /api/v1/feeds, or nil on
// one path.
func (g *guard) feedStatus() func() []web.FeedStatus {
	if g.feeds == nil {
		return nil
	}
	return g.feeds.status
}

// ready is the consumer's readiness, and an outbox with room.
func (g *guard) ready() bool {
	return g.consumer.Ready() && (g.app.Forward == nil || !g.app.Forward.Status().Full)
}

// start runs the consumer until stop.
func (g *guard) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan error, 1)
	g.running.Store(true)
	go func() { g.done <- g.consumer.Run(ctx) }()
}

// stop ends the consumer's Run, then the drainer's: what is in hand is
// committed and acknowledged, the session stays on the broker, and what
// the outbox still holds waits in the store.
func (g *guard) stop() error {
	var err error
	if g.cancel != nil {
		g.running.Store(false)
		g.cancel()
		err = <-g.done
		g.cancel = nil
		g.tally.disconnected()
	}
	g.haltForward()
	return err
}

// haltForward stops the drainer and waits for it.
func (g *guard) haltForward() {
	if g.stopForward != nil {
		g.stopForward()
		<-g.forwardDone
		g.stopForward = nil
	}
}

// failed reports an early end of Run (a refused subscription), if any.
func (g *guard) failed() error {
	if g.done == nil {
		return nil
	}
	select {
	case err := <-g.done:
		g.done <- err
		if err == nil {
			err = fmt.Errorf("replayguard's consumer stopped")
		}
		return err
	default:
		return nil
	}
}

// close stops the drainer if it still runs, then closes the engine, the
// drainer's output and the store.
func (g *guard) close() {
	g.haltForward()
	g.metrics.Close()
	if err := g.app.Close(); err != nil {
		g.app.Log.Warn("closing replayguard's store", "err", err)
	}
}

// picture is replayguard's projected entity state.
func (g *guard) picture() picture {
	p := picture{}
	for _, st := range g.eng.State() {
		for _, fv := range st.Fields {
			v := fv.Str
			if fv.Kind == engine.KindNumber {
				v = fv.Num
			}
			p.set(st.Name, fv.Name, v)
		}
	}
	return p
}

// engineObservers tells each observer about every commit.
type engineObservers []engine.Observer

func (os engineObservers) Committed(records []engine.AuditRecord, entities []engine.EntityState) {
	for _, o := range os {
		o.Committed(records, entities)
	}
}

// consumerObservers tells each observer about every consumer event.
type consumerObservers []source.Observer

func (os consumerObservers) Observe(e source.Event) {
	for _, o := range os {
		o.Observe(e)
	}
}

// tallyObserver feeds replayguard's tally from its consumer's events and
// its engine's commits.
type tallyObserver struct{ t *tally }

func (o tallyObserver) Observe(e source.Event) {
	switch e.Kind {
	case source.Connected:
		o.t.connected(e.Broker)
	case source.Disconnected:
		o.t.disconnected()
	case source.Received:
		o.t.received(e.N)
	case source.Abandoned:
		o.t.received(-e.N)
	}
}

func (o tallyObserver) Committed(records []engine.AuditRecord, _ []engine.EntityState) {
	for _, r := range records {
		if r.Ref != 0 {
			continue // an operator's release or discard, not a delivery
		}
		o.t.handled(r.Broker, recordID(r), r.Dup, r.Outcome)
	}
}

// recordID is the message an audit record decided, when it names one:
// named as the story names it (msgID).
func recordID(r engine.AuditRecord) *msgID {
	if len(r.Source) == 0 || r.Sequence == nil {
		return nil
	}
	return &msgID{source: strings.Join(r.Source, "/"), epoch: r.Epoch, seq: *r.Sequence}
}
