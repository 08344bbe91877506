package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	rgsource "github.com/replayguard/replayguard/source" // events; app has a type named source
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/web"
)

// ttlMargin is the retry delay allowed on top of the session expiry when
// checking that the key window outlives the broker's redeliveries.
const ttlMargin = 5 * time.Minute

// observers fans a commit out to several observers.
type observers []engine.Observer

func (os observers) Committed(r []engine.AuditRecord, e []engine.EntityState) {
	for _, o := range os {
		o.Committed(r, e)
	}
}

// OutboxCommitted passes the commit's outbox entries to the observers that
// hear them.
func (os observers) OutboxCommitted(entries []engine.OutboxEntry) {
	for _, o := range os {
		if oo, ok := o.(engine.OutboxObserver); ok {
			oo.OutboxCommitted(entries)
		}
	}
}

// OutboxResolved passes the commit's resolutions of held outbox entries
// to the observers that hear them.
func (os observers) OutboxResolved(rs []engine.OutboxResolve) {
	for _, o := range os {
		if ro, ok := o.(engine.OutboxResolveObserver); ok {
			ro.OutboxResolved(rs)
		}
	}
}

// OutboxHolds passes the pending outbox entries the commit held to the
// observers that hear them.
func (os observers) OutboxHolds(held []engine.OutboxHold) {
	for _, o := range os {
		if ho, ok := o.(engine.OutboxHoldObserver); ok {
			ho.OutboxHolds(held)
		}
	}
}

// Build identifies the binary in metrics and on the dashboard.
type Build struct{ Version, Commit string }

// Run is `replayguard run`: consume from MQTT, serve the API, until ctx is
// done; then stop receiving, commit and acknowledge what is in hand, and
// close the store last. It checks the configuration (checkRun), wires the
// metrics and the dashboard's hub into the app it opens, builds the source
// and the HTTP server, and serves them (daemon.serve).
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, build Build) error {
	if err := checkRun(cfg, log); err != nil {
		return err
	}
	if err := refuseUnpreparedSQL(ctx, cfg, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, build.Version, build.Commit, routeNames(cfg)...)
	hub := web.NewHub()
	opts := Options{Logger: log, Observer: observers{m, hub}, Member: RunMember(cfg), Sinks: true, ClaimOutboxes: true, Journal: true}
	var fm *metrics.Forward
	if kinds := cfg.OutputKinds(); len(kinds) > 0 {
		fm = metrics.NewForward(reg, kinds...)
		opts.ForwardObserver = fm
	}
	a, err := Open(ctx, cfg, opts)
	if stoppedStarting(ctx, err) {
		log.Info("stopped while starting, before consuming anything")
		return nil
	}
	if errors.Is(err, engine.ErrMemberHeld) && cfg.Store.Member == "" {
		// Members of a JetStream group share their consumer's name.
		return fmt.Errorf("%w; store.member is unset, so the member id is %s %q: give each process of a group a store.member of its own",
			err, cfg.RunMemberSetting(), cfg.RunMember())
	}
	if err != nil {
		return err
	}
	defer func() {
		if err := a.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
	}()
	// Deferred after the store's Close, so run before it: once serve has
	// stopped the HTTP server, a count of the windows a scrape left running
	// is cancelled and waited for.
	defer m.Close()
	m.Watch(a.Engine)
	m.WatchQuarantine(a.Store)
	storeStatus := a.readiness(a.watchStore(m))
	if a.Forward != nil {
		fm.WatchOutbox(a.Forward)
	}

	consumer, err := newSource(cfg, log, m, reg, a.Engine, a.shareMembership(cfg), a.Store.Capabilities().Marks)
	if err != nil {
		return err
	}
	if fs, ok := consumer.(*feedsSource); ok {
		if err := fs.recall(ctx, a.Store, a.Engine.Member()); err != nil {
			if stoppedStarting(ctx, err) {
				log.Info("stopped while starting, before consuming anything")
				return nil
			}
			log.Warn("feeds: cannot read which feed delivered the messages applied last: a twin of one of them applied again, its key gone, is not counted",
				"err", err)
		}
	}
	if w, ok := consumer.(interface{ Warning() string }); ok { // a feed down while another carries on
		storeStatus = withWarning(storeStatus, w.Warning)
	}
	storeStatus = withSourceStatus(storeStatus, consumer)
	storeStatus = withWarning(storeStatus, func() string { return commitWarning(cfg.Store.Kind, a.Engine, time.Now()) })
	d := &daemon{app: a, log: log, reg: reg, consumer: consumer, sinkFlush: SinkFlushTimeout}
	m.WatchReady(d.ready)
	if d.chains, err = a.chainWork(); err != nil {
		return err
	}
	if d.chains == nil {
		if d.retention, err = a.Retention(); err != nil {
			return err
		}
	}
	// Built before anything starts, so that a token it refuses stops run
	// with nothing to wait for.
	if d.server, err = d.newServer(build, hub, storeStatus); err != nil {
		return err
	}
	// Bound before anything starts too: an address in use stops run
	// before it says it serves, or consumes anything.
	if d.server != nil {
		if d.listener, err = d.server.Listen(); err != nil {
			return fmt.Errorf("http: %w", err)
		}
	}
	return d.serve(ctx)
}

// stoppedStarting reports whether err is ctx's end: run was stopped
// (SIGINT, SIGTERM) while it opened the store, which is a stop, not a
// failure; nothing was consumed yet.
func stoppedStarting(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled)
}

func consumerConfig(cfg *config.Config, log *slog.Logger, obs rgsource.Observer) (mqtt.Config, error) {
	c := consumerBase(cfg, log, obs)
	var err error
	if c.Password, err = secretOf("mqtt.password", cfg.MQTT.PasswordEnv, cfg.MQTT.PasswordFile); err != nil {
		return c, err
	}
	c.TLS, err = clientTLS(cfg.MQTT.TLS)
	return c, err
}

// consumerBase is consumerConfig without the password and the TLS
// settings, which a feed of mqtt.feeds has of its own.
func consumerBase(cfg *config.Config, log *slog.Logger, obs rgsource.Observer) mqtt.Config {
	mc := cfg.MQTT
	c := mqtt.Config{Brokers: mc.Brokers, ClientID: mc.ClientID, SessionExpiry: time.Duration(mc.SessionExpiry),
		CleanStart: mc.CleanStart, ShareGroup: mc.ShareGroup, FormerShareGroups: mc.FormerShareGroups, FormerFilters: mc.FormerFilters, Username: mc.Username,
		KeepAlive: time.Duration(mc.KeepAlive), BatchSize: mc.BatchSize, BatchLinger: time.Duration(mc.BatchLinger),
		ReceiveMaximum: uint16(mc.ReceiveMaximum), Logger: log, Observer: obs}
	for _, r := range cfg.Routes {
		qos := 1
		if r.QoS != nil {
			qos = *r.QoS
		}
		if r.Kind != config.RouteSparkplug {
			c.Filters = append(c.Filters, mqtt.Filter{Topic: r.Topic, QoS: byte(qos), Route: r.Name})
			continue
		}
		// A Sparkplug route's messages reach every member of a share
		// group, each in its edge's order (mqtt.Filter.Unshared); it
		// subscribes to the message types it decides alone, never to the
		// host applications' commands and states its topic also covers.
		// A session resumed from a build that subscribed to the topic
		// itself has that subscription removed (consume.StaleForms), unless
		// another route asks for it.
		subs := sparkplug.Subscriptions(r.Topic)
		for _, topic := range subs {
			c.Filters = append(c.Filters, mqtt.Filter{Topic: topic, QoS: byte(qos), Unshared: true, Route: r.Name})
		}
		if !slices.Contains(subs, r.Topic) && !slices.Contains(c.FormerFilters, r.Topic) {
			c.FormerFilters = append(slices.Clip(c.FormerFilters), r.Topic)
		}
	}
	return c
}

// HTTPTokens reads the secret of every configured HTTP token (the single
// token_env/token_file is one operator named "operator"). It refuses an
// empty secret, and two entries with the same one, naming the entries and
// never the secret.
func HTTPTokens(h config.HTTPConfig) ([]web.NamedToken, error) {
	var out []web.NamedToken
	first := map[string]int{}
	for i, t := range h.TokenList() {
		where := fmt.Sprintf("http.tokens[%d] (%s)", i, t.Name)
		if len(h.Tokens) == 0 {
			where = "http token"
		}
		secret, err := Secret(t.TokenEnv, t.TokenFile)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %w", where, err)
		case secret == "":
			return nil, fmt.Errorf("%s: the token is empty", where)
		case strings.TrimSpace(secret) != secret:
			// The server compares a request's token trimmed: this one could
			// never match, and its holder would be locked out unawares.
			return nil, fmt.Errorf("%s: the token has white space before or after it, which a request's token never has: remove it", where)
		}
		if j, dup := first[secret]; dup {
			return nil, fmt.Errorf("http.tokens[%d] (%s) and %s hold the same token: give each holder its own, so the audit can tell them apart",
				j, h.Tokens[j].Name, where)
		}
		first[secret] = i
		out = append(out, web.NamedToken{Name: t.Name, Secret: secret, Role: web.Role(t.Role)})
	}
	return out, nil
}

// secretOf is Secret for the setting label ("mqtt.password"): its error
// names password_env or password_file, whichever is written.
func secretOf(label, envName, file string) (string, error) {
	v, err := Secret(envName, file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label+secretSuffix(file), err)
	}
	return v, nil
}

// secretSuffix is the suffix of the setting a secret is read through:
// "_file" when file is set, else "_env".
func secretSuffix(file string) string {
	if file != "" {
		return "_file"
	}
	return "_env"
}

// outputPasswordSetting is the setting outputs.mqtt's password comes
// from, as key (for its line) and label: the output's own when the file
// or the environment sets it, else the consumer's it inherits (mqtt's,
// or the first feed's).
func outputPasswordSetting(cfg *config.Config) (key, label string) {
	own := "outputs.mqtt.password"
	if cfg.Sets(own+"_env") || cfg.Sets(own+"_file") {
		return own, own
	}
	o := cfg.Outputs.MQTT
	if fs := cfg.MQTT.Feeds; len(fs) > 0 {
		if o.PasswordEnv == fs[0].PasswordEnv && o.PasswordFile == fs[0].PasswordFile {
			return "mqtt.feeds[0].password", fmt.Sprintf("mqtt.feeds[0] (%s).password", fs[0].Name)
		}
	} else if o.PasswordEnv == cfg.MQTT.PasswordEnv && o.PasswordFile == cfg.MQTT.PasswordFile {
		return "mqtt.password", "mqtt.password"
	}
	return own, own
}

// Secret reads a value from an environment variable or a file.
func Secret(envName, file string) (string, error) {
	switch {
	case envName != "":
		v, ok := os.LookupEnv(envName)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", envName)
		}
		return v, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}

func clientTLS(t config.TLSConfig) (*tls.Config, error) {
	if t == (config.TLSConfig{}) {
		return nil, nil
	}
	c := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s: no PEM certificate in it", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file/key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// lossReviewer is the engine on a shared store, nil on a single-owner one.
func (a *App) lossReviewer() web.LossReviewer {
	if !a.Config.Store.Shared() {
		return nil
	}
	return a.Engine
}

// watchStore adds a shared store's counters to the metrics and returns its
// status for /readyz (nil for a single-owner store).
// storeNamed is msg, a shared store's error, naming the store once.
func storeNamed(kind, msg string) string {
	if strings.HasPrefix(msg, kind+" store") {
		return msg
	}
	return kind + " store: " + msg
}

// CommitWarn is how long a commit runs before /readyz warns of it.
const CommitWarn = 10 * time.Second

// commitWarning is /readyz's warning of a commit that has run CommitWarn
// or longer: the feed waits for it, and nothing said so until it failed.
func commitWarning(kind string, e *engine.Engine, now time.Time) string {
	since, ok := e.Committing()
	if !ok || now.Sub(since) < CommitWarn {
		return ""
	}
	why := "a disk that does not keep up?"
	if kind == config.StorePostgres {
		why = "a lock on a table its sql effects write, or on the rows another member's batch holds? pg_stat_activity and pg_locks show who holds it"
	} else if kind == config.StoreRedis {
		why = "a server that does not answer, or the rows another member's batch holds?"
	}
	return fmt.Sprintf("a commit to the %s store has been running for %v, the deliveries behind it wait (%s)", kind, now.Sub(since).Round(time.Second), why)
}

// ClockOffsetWarn is the offset of a member's clock from its shared store
// server's at which /readyz warns.
const ClockOffsetWarn = time.Second

// clockWarning is /readyz's warning of a member whose clock is
// ClockOffsetWarn or more off its store server's; "" otherwise.
func clockWarning(kind string, st engine.SharedStats) string {
	if off := st.ClockOffset; st.ClockMeasured.IsZero() || off.Abs() < ClockOffsetWarn {
		return ""
	}
	return fmt.Sprintf("this member's clock is %v off the %s store server's (ahead when positive): its audit records carry its wall time, off by as much "+
		"(the group's keys age by the server's clock); sync the clock (docs/consumer-groups.md, Clocks)", st.ClockOffset.Round(time.Millisecond), kind)
}

func (a *App) watchStore(m *metrics.Metrics) func() web.StoreStatus {
	rep := a.Store.Capabilities().Stats
	if rep == nil {
		return nil
	}
	kind := a.Config.Store.Kind
	m.WatchStore(kind, a.Engine.Member(), rep)
	m.WatchLoss(kind, a.Engine.Member(), a.Engine)
	if a.Journal != nil {
		m.WatchJournal(kind, a.Engine.Member(), a.Journal)
	}
	if st := rep.SharedStats(); !st.Durable {
		a.Log.Warn("the shared store may lose a commit after the broker was acknowledged: accepted through store.allow_not_durable",
			"store", kind, "setting", st.NotDurable)
	}
	if a.Journal == nil {
		a.Log.Warn("store.journal.path is off: a store failover that loses acknowledged commits is found only while this process runs, and can only be accepted as lost",
			"store", kind)
	}
	return func() web.StoreStatus {
		st := rep.SharedStats()
		out := web.StoreStatus{}
		if err := a.storeError(); err != nil {
			out.Error = storeNamed(kind, err.Error())
		} else if st.LastError != "" {
			out.Error = storeNamed(kind, st.LastError)
		}
		if l := a.Engine.Loss(); l != nil {
			out.Error = l.Error()
		}
		var warn []string
		if !st.Durable {
			warn = append(warn, fmt.Sprintf("%s store runs without durable commits (%s), accepted through store.allow_not_durable", kind, st.NotDurable))
		}
		if w := clockWarning(kind, st); w != "" {
			warn = append(warn, w)
		}
		if st.AsyncReplication != "" {
			warn = append(warn, fmt.Sprintf("%s store replicates asynchronously (%s), accepted through store.allow_async_replication: a failover can lose acknowledged commits, which the journal recovers", kind, st.AsyncReplication))
		}
		out.Warning = strings.Join(warn, "; ")
		return out
	}
}
