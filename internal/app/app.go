package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/redis"
)

// Store is what the commands need of a backend: engine.Store, whose
// Capabilities say what else it does.
type Store = engine.Store

// App is an opened configuration: its store and, unless read-only, its engine.
type App struct {
	Config *config.Config
	Store  Store
	Engine *engine.Engine // nil when opened read-only
	Log    *slog.Logger
	// Sinks are the audit sinks audit.sinks configures, when Options.Sinks
	// asked for them; nil otherwise. The caller runs them (Run or Flush);
	// Close closes them.
	Sinks *sink.Set
	// Journal is the member's journal on a shared store, when
	// Options.Journal asked for it and store.journal.path is not off.
	Journal *journal.Journal
	// Forward is the drainer of the forward effects' outbox, when a route
	// forwards; nil otherwise. It is the engine's backpressure gate from
	// the start; the caller runs it (RunForward) and stops it before Close,
	// which closes its outputs.
	Forward *forward.Drainer

	checkErr atomic.Pointer[error] // the shared store's last check's error (CheckStore), nil once one succeeds
	// ages is the clock audit retention measures audit.retention.max_age
	// on, first read when the app opens: a step of the wall clock does
	// not move it (audit.AgeClock). nil: each Retention its own.
	ages *audit.AgeClock
}

// Options tune Open.
type Options struct {
	ReadOnly bool         // open the store for reading; no engine
	Logger   *slog.Logger // default: discard
	Observer engine.Observer
	// Sinks builds the configured audit sinks (run and ingest), woken by
	// every commit. Unused by read-only opens.
	Sinks bool
	// Member is the member id on a shared store when store.member is not
	// set (run passes mqtt.client_id); when both are empty a writing
	// command takes one of its own (MemberFor). Unused by read-only opens.
	Member string
	// ForwardObserver hears about the drainer's deliveries (metrics).
	ForwardObserver forward.Observer
	// AdmitWait, when positive, bounds how long a batch waits for room in
	// a full outbox before it is refused with forward.ErrFull (ingest);
	// zero waits as long as the caller's context (run).
	AdmitWait time.Duration
	// ClaimOutboxes drains dead members' outboxes too, on a shared store
	// that hands them over (run).
	ClaimOutboxes bool
	// OutputClientID is the MQTT output's client id when neither
	// outputs.mqtt.client_id nor mqtt.client_id sets one.
	OutputClientID string
	// Journal keeps the member's journal on a shared store (run, whose
	// member id is fixed). Unused by read-only opens.
	Journal bool
}

// Open opens the configured store and, unless read-only, an engine on it.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*App, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sc := cfg.Store
	if sc.Shared() {
		if opts.ReadOnly {
			sc.Member = ""
		} else if sc.Member == "" {
			sc.Member = opts.Member
		}
		if !opts.ReadOnly && sc.Member == "" {
			return nil, fmt.Errorf("store kind %s needs a member id: set store.member", sc.Kind)
		}
	}
	st, err := openStore(ctx, sc, cfg.Window, opts.ReadOnly, log)
	if err != nil {
		return nil, err
	}
	return openOn(ctx, cfg, sc, st, opts, log)
}

// openOn is Open on st, the opened store sc names (tests pass a store of
// their own). It closes st when it fails.
func openOn(ctx context.Context, cfg *config.Config, sc config.StoreConfig, st Store, opts Options, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{Config: cfg, Store: st, Log: log, ages: audit.NewAgeClock(nil, nil)}
	a.ages.Read() // the first reading: the records' ages are measured from the start
	if opts.ReadOnly {
		return a, nil
	}
	if err := a.openEngine(ctx, sc, opts); err != nil {
		a.closeForward()
		a.closeSinks()
		a.closeJournal()
		st.Close()
		return nil, err
	}
	return a, nil
}

// openEngine opens the member's journal, the audit sinks and the forward
// drainer that opts ask for, then the engine on the store, which they
// observe; on an error the caller closes what it opened.
func (a *App) openEngine(ctx context.Context, sc config.StoreConfig, opts Options) error {
	eo := EngineOptions(a.Config)
	eo.Logger = a.Log
	eo.StoreName = storeName(sc)
	var err error
	if opts.Journal {
		if a.Journal, err = openJournal(sc, sc.Member, a.Log); err != nil {
			return err
		}
		if a.Journal != nil {
			eo.Journal = a.Journal
		}
	}
	var obs observers
	if opts.Observer != nil {
		obs = append(obs, opts.Observer)
	}
	if opts.Sinks {
		if a.Sinks, err = newSinks(ctx, a.Config, a.Store, sc.Member, a); err != nil {
			return err
		}
		if a.Sinks != nil {
			obs = append(obs, a.Sinks)
		}
	}
	if a.Forward, err = newDrainer(a.Config, a.Store, sc.Member, opts); err != nil {
		return err
	}
	a.warnUndrained(ctx, sc.Member)
	if a.Forward != nil {
		obs = append(obs, a.Forward)
		eo.Admit = a.Forward.Admit
		if opts.AdmitWait > 0 {
			eo.Admit = a.Forward.AdmitWithin(opts.AdmitWait)
		}
	}
	eo.Observer = oneObserver(obs)
	if a.Engine, err = engine.New(ctx, a.Store, eo); err != nil {
		return err
	}
	if a.Sinks != nil {
		a.Sinks.SetHead(a.Engine.Stats().Position)
	}
	return nil
}

// oneObserver is obs as the engine's observer: nil for none, the only one
// as itself.
func oneObserver(obs observers) engine.Observer {
	switch len(obs) {
	case 0:
		return nil
	case 1:
		return obs[0]
	}
	return obs
}

// OpenStore opens the backend the store section names; a shared store
// under store.member, or read-only without one.
func OpenStore(sc config.StoreConfig, readOnly bool, log *slog.Logger) (Store, error) {
	if readOnly {
		sc.Member = ""
	}
	return openStore(context.Background(), sc, config.WindowConfig{}, readOnly, log)
}

func openStore(ctx context.Context, sc config.StoreConfig, w config.WindowConfig, readOnly bool, log *slog.Logger) (Store, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch sc.Kind {
	case config.StoreMemory:
		return memory.New(), nil
	case config.StoreEmbedded, "":
		if _, err := os.Stat(sc.Path); readOnly && errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no store at %s: nothing has been ingested or run with this configuration yet", sc.Path)
		}
		st, err := embedded.Open(sc.Path, embedded.Options{ReadOnly: readOnly, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", sc.Path, err)
		}
		return st, nil
	case config.StorePostgres:
		st, err := postgres.Open(ctx, postgres.Options{URL: sc.URL, Member: sc.Member, Schema: sc.Schema,
			TTL: time.Duration(w.TTL), MaxEntries: w.MaxEntries, AllowNotDurable: sc.AllowNotDurable,
			AllowAsyncReplication: sc.AllowAsyncReplication, CommitTimeout: time.Duration(sc.CommitTimeout), Logger: log})
		if err != nil {
			return nil, err
		}
		return st, nil
	case config.StoreRedis:
		st, err := redis.Open(ctx, redis.Options{URL: sc.URL, Member: sc.Member, Prefix: sc.Prefix,
			TTL: time.Duration(w.TTL), MaxEntries: w.MaxEntries, AllowNotDurable: sc.AllowNotDurable,
			AllowAsyncReplication: sc.AllowAsyncReplication, WaitReplicas: sc.WaitReplicas,
			CommitTimeout: time.Duration(sc.CommitTimeout), Logger: log})
		if err != nil {
			return nil, err
		}
		return st, nil
	default:
		return nil, fmt.Errorf("%w: %q", ErrStoreKind, sc.Kind)
	}
}

// MemberFor is the member id a command other than run writes a shared
// store's chain under when store.member is not set: the command, the host
// and the process, so that two such processes never share one.
func MemberFor(command string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s-%s-%d", command, host, os.Getpid())
}

// EngineOptions maps the configuration onto the engine's options.
func EngineOptions(cfg *config.Config) engine.Options {
	o := engine.Options{
		TTL:          time.Duration(cfg.Window.TTL),
		MaxEntries:   cfg.Window.MaxEntries,
		SequenceSpan: cfg.Window.SequenceSpan,
		KeepEpochs:   cfg.Window.KeepEpochs,
		MaxPayload:   int(cfg.Limits.MaxPayload),
		CachedRows:   cfg.Store.CachedRows,
		Kinds:        []engine.RouteKind{sparkplug.RouteKind{}}, // json is built in
	}
	for _, r := range cfg.Routes {
		er := engine.Route{Name: r.Name, Kind: r.Kind, Topic: r.Topic, Source: r.Source, Sequence: r.Sequence, Epoch: r.Epoch, ID: r.ID}
		for _, e := range r.Effects {
			es := engine.EffectSpec{Entity: e.Entity, Add: e.Add, Set: e.Set, Max: e.Max, Min: e.Min, SQL: e.SQL, Args: e.Args}
			if f := e.Forward; f != nil {
				es.Forward = &engine.ForwardSpec{Topic: f.Topic, Webhook: f.Webhook, NATS: f.NATS}
			}
			er.Effects = append(er.Effects, es)
		}
		o.Routes = append(o.Routes, er)
	}
	return o
}

// Close stops the engine, closes the audit sinks' exporters (whose
// goroutines the caller has stopped), then closes the store.
func (a *App) Close() error {
	if a.Engine != nil {
		a.Engine.Close()
	}
	a.closeForward()
	a.closeSinks()
	a.closeJournal()
	return a.Store.Close()
}

func (a *App) closeJournal() {
	if a.Journal != nil {
		if err := a.Journal.Close(); err != nil {
			a.Log.Warn("closing the journal", "err", err)
		}
	}
}

func (a *App) closeForward() {
	if a.Forward != nil {
		if err := a.Forward.Close(); err != nil {
			a.Log.Warn("closing the forward outputs", "err", err)
		}
	}
}

func (a *App) closeSinks() {
	if a.Sinks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.Sinks.Close(ctx); err != nil {
			a.Log.Warn("closing the audit sinks", "err", err)
		}
	}
}

// Snapshot reads entity and source state without an engine.
func (a *App) Snapshot(ctx context.Context) (*engine.Snapshot, error) {
	return a.Store.Load(ctx)
}

// auditHeadReader is a single-owner store that reads its chain head
// without loading the rest of its state (the embedded store).
type auditHeadReader interface {
	AuditHead(ctx context.Context) (engine.AuditHead, error)
}

// AuditHead reads the chain head of a single-owner store's log: alone
// where the store can, else from a snapshot of its whole state.
func (a *App) AuditHead(ctx context.Context) (engine.AuditHead, error) {
	return auditHead(ctx, a.Store)
}

// auditHead reads the chain head of s, a single-owner store.
func auditHead(ctx context.Context, s engine.Store) (engine.AuditHead, error) {
	if h, ok := s.(auditHeadReader); ok {
		return h.AuditHead(ctx)
	}
	snap, err := s.Load(ctx)
	if err != nil {
		return engine.AuditHead{}, err
	}
	return snap.AuditHead, nil
}
