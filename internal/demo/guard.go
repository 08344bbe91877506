package demo

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/web"
)

// routesYAML is the demo's route, the incidents route of
// examples/replayguard.yaml.
const routesYAML = `
routes:
  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    epoch: boot_id
    effects:
      - entity: "incident/{incident_id}"
        add: {casualties: casualty_delta}
        set: {status: incident_status}
      - entity: "unit/{unit_id}"
        set: {status: unit_status}
`

// guard is replayguard consuming the same feed: the MQTT consumer of
// source/mqtt over an engine on an embedded store, observed by the metrics
// and the dashboard's hub.
type guard struct {
	store    *embedded.Store
	eng      *engine.Engine
	consumer *mqtt.Consumer
	hub      *web.Hub
	reg      *prometheus.Registry
	tally    *tally

	cancel context.CancelFunc
	done   chan error
}

type guardConfig struct {
	dir      string // the store's directory
	brokers  []string
	clientID string
	filter   string
	version  string
	retry    time.Duration // first reconnect delay
	log      *slog.Logger
}

func openGuard(ctx context.Context, cfg guardConfig, t *tally) (*guard, error) {
	c, err := config.Parse([]byte(routesYAML), "demo routes", nil)
	if err != nil {
		return nil, fmt.Errorf("demo routes: %w", err)
	}
	st, err := embedded.Open(cfg.dir, embedded.Options{Logger: cfg.log})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	g := &guard{store: st, hub: web.NewHub(), reg: prometheus.NewRegistry(), tally: t}
	m := metrics.New(g.reg, cfg.version, "", "incidents")
	opts := app.EngineOptions(c)
	opts.Logger = cfg.log
	opts.Observer = engineObservers{g.hub, m, tallyObserver{t}}
	if g.eng, err = engine.New(ctx, st, opts); err != nil {
		st.Close()
		return nil, err
	}
	m.Watch(g.eng)
	m.WatchQuarantine(st)
	g.consumer, err = mqtt.New(mqtt.Config{
		Brokers:         cfg.brokers,
		ClientID:        cfg.clientID,
		SessionExpiry:   time.Hour,
		Filters:         []mqtt.Filter{{Topic: cfg.filter, QoS: 1}},
		ConnectRetryMin: cfg.retry,
		ConnectRetryMax: 4 * cfg.retry,
		ConnectTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		Logger:          cfg.log,
		Observer:        consumerObservers{m, tallyObserver{t}},
	}, m.CountGaps(g.eng))
	if err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// start runs the consumer until stop.
func (g *guard) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan error, 1)
	go func() { g.done <- g.consumer.Run(ctx) }()
}

// stop ends the consumer's Run: what is in hand is committed and
// acknowledged, the session stays on the broker.
func (g *guard) stop() error {
	if g.cancel == nil {
		return nil
	}
	g.cancel()
	err := <-g.done
	g.cancel = nil
	g.tally.disconnected()
	return err
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

func (g *guard) close() {
	g.eng.Close()
	g.store.Close()
}

// picture is replayguard's projected entity state.
func (g *guard) picture() picture {
	p := picture{}
	for _, st := range g.eng.State() {
		for name, fv := range st.Fields {
			v := fv.Str
			if fv.Kind == engine.KindNumber {
				v = fv.Num
			}
			p.set(st.Name, name, v)
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
type consumerObservers []mqtt.Observer

func (os consumerObservers) Observe(e mqtt.Event) {
	for _, o := range os {
		o.Observe(e)
	}
}

// tallyObserver feeds replayguard's tally from its consumer's events and
// its engine's commits.
type tallyObserver struct{ t *tally }

func (o tallyObserver) Observe(e mqtt.Event) {
	switch e.Kind {
	case mqtt.Connected:
		o.t.connected(e.Broker)
	case mqtt.Disconnected:
		o.t.disconnected()
	case mqtt.Received:
		o.t.received(e.N)
	case mqtt.Abandoned:
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

// recordID is the report an audit record decided, when it names one.
func recordID(r engine.AuditRecord) *msgID {
	if len(r.Source) != 2 || r.Sequence == nil {
		return nil
	}
	boot, err := strconv.ParseInt(r.Epoch, 10, 64)
	if err != nil {
		return nil
	}
	return &msgID{agency: r.Source[0], source: r.Source[1], boot: boot, seq: *r.Sequence}
}
