package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/redis"
)

// lintTimeout bounds how long CheckSQL waits for the database.
const lintTimeout = 10 * time.Second

// CheckSQL checks every sql effect's statement against the postgres
// store's server, preparing it without running it (see
// postgres.CheckStatements), and returns a problem for each statement the
// server refuses or whose parameters differ from its args, at
// routes[i].effects[j].sql. When the server cannot be reached, it returns
// no problem and skipped says why nothing was checked. A configuration
// without sql effects checks nothing and skips nothing.
func CheckSQL(ctx context.Context, cfg *config.Config) (problems []config.Problem, skipped error) {
	var stmts []postgres.Statement
	var keys []string
	for i, r := range cfg.Routes {
		for j, e := range r.Effects {
			if e.SQL != "" {
				stmts = append(stmts, postgres.Statement{SQL: e.SQL, Args: len(e.Args)})
				keys = append(keys, fmt.Sprintf("routes[%d].effects[%d].sql", i, j))
			}
		}
	}
	if len(stmts) == 0 || cfg.Store.Kind != config.StorePostgres {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lintTimeout)
	defer cancel()
	found, err := postgres.CheckStatements(ctx, cfg.Store.URL, stmts)
	if errors.Is(err, postgres.ErrUnreachable) {
		return nil, err
	}
	if err != nil {
		return []config.Problem{cfg.Place("store.url", config.Problem{Path: "store.url", Message: err.Error()})}, nil
	}
	for i, p := range found {
		if p != "" {
			problems = append(problems, cfg.Place(keys[i], config.Problem{Path: keys[i], Message: p}))
		}
	}
	return problems, nil
}

// refuseUnpreparedSQL refuses to run, as lint does, with lint's words, a
// sql effect whose statement the server will not prepare (a syntax error,
// a table or column that does not exist, a parameter count other than
// args): run would otherwise start ready and fail every batch from the
// first message on. A table created after the refusal lets the next
// start run (a unit restarts on failure). The problems come as a
// config.ValidationError without a file name, which the caller may set.
// A server that cannot be reached is logged and left to the store's open.
func refuseUnpreparedSQL(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	problems, skipped := CheckSQL(ctx, cfg)
	if len(problems) > 0 {
		return &config.ValidationError{Problems: problems}
	}
	if skipped != nil {
		log.Warn("sql statements not checked against the database at start", "err", skipped)
	}
	return nil
}

// CheckLocal reads what run reads from this machine before it connects
// to anything: the HTTP tokens, the passwords named by an environment
// variable or a file, the TLS files, and whether each file sink can
// append to its file. It returns a problem for each
// that run would refuse, so that lint, run on the machine that runs the
// daemon (a unit's ExecStartPre), says what run would.
func CheckLocal(cfg *config.Config) []config.Problem {
	var ps []config.Problem
	// key is the setting, for its line; label the path shown
	add := func(key, label string, err error) {
		if err == nil {
			return
		}
		if p := cfg.Place(key, config.Problem{Path: label, Message: err.Error()}); !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	// key and label end in "password": the setting is password_env or
	// password_file, whichever is written, and the problem names it so.
	secret := func(key, label, env, file string) {
		_, err := Secret(env, file)
		add(key+secretSuffix(file), label+secretSuffix(file), err)
	}
	tlsFiles := func(key, label string, t config.TLSConfig) {
		_, err := clientTLS(t)
		add(key, label, err)
	}
	if cfg.HTTP.Enabled() {
		_, err := HTTPTokens(cfg.HTTP)
		add("http.tokens", "", err) // its errors name the entry
		// the server's certificate, and the CA its clients' must be signed by
		tlsFiles("http.tls", "http.tls", cfg.HTTP.TLS)
	}
	if cfg.Input == config.InputJetStream && cfg.JetStream != nil {
		tlsFiles("jetstream.tls", "jetstream.tls", cfg.JetStream.TLS)
		if f := cfg.JetStream.CredsFile; f != "" {
			_, err := os.Stat(f)
			add("jetstream.creds_file", "jetstream.creds_file", err)
		}
	} else if len(cfg.MQTT.Feeds) == 0 {
		secret("mqtt.password", "mqtt.password", cfg.MQTT.PasswordEnv, cfg.MQTT.PasswordFile)
		tlsFiles("mqtt.tls", "mqtt.tls", cfg.MQTT.TLS)
	} else {
		// run reads mqtt's own password and TLS files only through the
		// feeds that take them, which carry them after the defaults.
		for i, f := range cfg.MQTT.Feeds {
			key, label := fmt.Sprintf("mqtt.feeds[%d]", i), fmt.Sprintf("mqtt.feeds[%d] (%s)", i, f.Name)
			secret(key+".password", label+".password", f.PasswordEnv, f.PasswordFile)
			if f.TLS != nil {
				tlsFiles(key+".tls", label+".tls", *f.TLS)
			}
		}
	}
	if o := cfg.Outputs.MQTT; o != nil {
		// An inherited password is the consumer's setting: checked
		// there, and reported once.
		key, label := outputPasswordSetting(cfg)
		secret(key, label, o.PasswordEnv, o.PasswordFile)
		tlsFiles("outputs.mqtt.tls", "outputs.mqtt.tls", o.TLS)
	}
	if w := cfg.Outputs.Webhook; w != nil {
		tlsFiles("outputs.webhook.tls", "outputs.webhook.tls", w.TLS)
	}
	if n := cfg.Outputs.NATS; n != nil {
		tlsFiles("outputs.nats.tls", "outputs.nats.tls", n.TLS)
	}
	switch cfg.Store.Kind {
	case config.StoreEmbedded:
		add("store.path", "store.path", checkStoreDir(cfg.Store.Path))
	case config.StorePostgres:
		add("store.url", "store.url", postgres.CheckURL(cfg.Store.URL))
	case config.StoreRedis:
		add("store.url", "store.url", redis.CheckURL(cfg.Store.URL))
	}
	for i, s := range cfg.Audit.Sinks {
		tlsFiles(fmt.Sprintf("audit.sinks[%d].tls", i), fmt.Sprintf("audit.sinks[%d] (%s).tls", i, s.Name), s.TLS)
		if s.Kind == config.SinkFile && s.Path != "" {
			add(fmt.Sprintf("audit.sinks[%d].path", i), fmt.Sprintf("audit.sinks[%d] (%s).path", i, s.Name), sink.CheckFile(s.Path))
		}
	}
	return ps
}

// checkStoreDir says why run could not open an embedded store in the
// directory dir, which it creates with its parents when missing: a file
// in the way, or a nearest existing directory that takes no new one.
// It creates nothing that stays.
func checkStoreDir(dir string) error {
	dir = filepath.Clean(dir)
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) && filepath.Dir(p) != p:
			continue // a parent is missing, or is a file: found going up
		case err != nil:
			return err
		case !st.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		case p == dir:
			return nil // the store's directory: run opens the store in it
		}
		// the nearest directory that exists: run creates the rest in it
		tmp, err := os.MkdirTemp(p, ".replayguard-check-*")
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("cannot create %s in %s: %w", dir, p, err)
		}
		return os.Remove(tmp)
	}
}

// CheckKeyDerivations compares each route's key derivation (kind, source,
// sequence, epoch, id) with the one the configured store records, writing
// nothing, and returns a problem at routes[i] for each route whose recorded
// one differs: run would refuse it at start. A store not created yet
// records nothing; when the store cannot be opened or read (held by a
// running process, a server unreachable), skipped says why nothing was
// checked.
func CheckKeyDerivations(ctx context.Context, cfg *config.Config) (problems []config.Problem, skipped error) {
	sc := cfg.Store
	if sc.Kind == config.StoreMemory || len(cfg.Routes) == 0 {
		return nil, nil
	}
	if sc.Kind == config.StoreEmbedded || sc.Kind == "" {
		if _, err := os.Stat(sc.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, lintTimeout)
	defer cancel()
	sc.Member = ""
	st, err := openStore(ctx, sc, cfg.Window, true, nil)
	if errors.Is(err, postgres.ErrNoStore) { // created by the first member: nothing recorded yet
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if p, ok := notDurable(cfg, st); ok {
		problems = append(problems, p)
	}
	changed, ok, err := engine.CheckKeyDerivations(ctx, st, EngineOptions(cfg))
	if err != nil || !ok {
		return problems, err
	}
	for i, r := range cfg.Routes {
		if ch := changed[r.Name]; len(ch) > 0 {
			key := fmt.Sprintf("routes[%d]", i)
			problems = append(problems, cfg.Place(key, config.Problem{Path: fmt.Sprintf("%s (%s)", key, r.Name),
				Message: strings.Join(ch, "; ") + ": the store holds keys and source windows derived the recorded way, and run refuses the route; " +
					"restore the recorded settings, or give the route a new name (replays of what it applied under the old name are then no longer caught)"}))
		}
	}
	return problems, nil
}

// notDurable is the problem run would refuse the shared store st with, a
// read-only handle on it, when its server could lose a commit that
// returned and store.allow_not_durable does not accept that; ok is false
// when there is none.
func notDurable(cfg *config.Config, st Store) (config.Problem, bool) {
	s, isShared := st.(interface{ SharedStats() engine.SharedStats })
	if !isShared || cfg.Store.AllowNotDurable {
		return config.Problem{}, false
	}
	bad := s.SharedStats().NotDurable
	if bad == "" {
		return config.Problem{}, false
	}
	return cfg.Place("store", config.Problem{Path: "store", Message: fmt.Sprintf("the %s server is not durable (%s): a commit could be lost after the broker was acknowledged, and run refuses it; "+
		"fix the setting, or set store.allow_not_durable: true to accept that", cfg.Store.Kind, bad)}), true
}
