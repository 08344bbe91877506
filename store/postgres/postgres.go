package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

// DefaultSchema is the schema a group's tables live in when
// Options.Schema is empty.
const DefaultSchema = "replayguard"

// DefaultLeaseTTL is how long a member's lease holds without renewal when
// Options.LeaseTTL is zero.
const DefaultLeaseTTL = 15 * time.Second

// DefaultCommitTimeout bounds one Update or Commit when
// Options.CommitTimeout is zero.
const DefaultCommitTimeout = 30 * time.Second

// pruneEvery is how often the pruning task runs.
const pruneEvery = 5 * time.Second

// ErrReadOnly is returned by Commit and Update on a handle opened without
// a member id.
var ErrReadOnly = errors.New("postgres store: opened without a member id (read-only)")

// ErrNoStore is returned by a read-only Open of a schema no member has
// created yet.
var ErrNoStore = errors.New("holds no replayguard store")

// ErrMembersRunning is returned by Open when the schema is older than this
// build's and other members hold their leases: members of an earlier build
// still run, and the schema is left as it is.
var ErrMembersRunning = errors.New("members of the group are running")

// Options configure Open.
type Options struct {
	// URL is the server, a PostgreSQL connection URL or keyword/value
	// string. Required.
	URL string
	// Member is the member id whose audit chain this handle writes; ""
	// opens a read-only handle, which takes no lease and refuses Commit
	// and Update.
	Member string
	// Schema holds the group's tables. Default DefaultSchema.
	Schema string
	// TTL is the age after which the pruning task deletes a key. Default
	// engine.DefaultTTL.
	TTL time.Duration
	// MaxEntries is how many keys the pruning task keeps, the newest by
	// ordinal. Default engine.DefaultMaxEntries.
	MaxEntries int
	// LeaseTTL is how long the member's lease holds without renewal; it is
	// renewed every LeaseTTL/3. Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// AllowNotDurable opens a server with synchronous_commit = off or
	// fsync = off, which can lose a commit after the broker was
	// acknowledged (config store.allow_not_durable). SharedStats reports
	// it. Default false: such a server is refused.
	AllowNotDurable bool
	// AllowAsyncReplication opens, for a member, a primary whose streaming
	// standbys do not make a commit wait for them (synchronous_standby_names
	// empty, or synchronous_commit = local or off), on which a commit
	// acknowledged to the broker is lost when a standby that lacks it is
	// promoted (config store.allow_async_replication). SharedStats'
	// AsyncReplication then says so. Every new connection checks again.
	// Default false: such a primary is refused, naming the setting.
	// A standby (a server in recovery) is refused for a member either way;
	// a read-only handle checks neither.
	AllowAsyncReplication bool
	// CommitTimeout bounds one Update or Commit, the commit's wait for a
	// synchronous standby included (config store.commit_timeout); when it
	// ends the call, the error says what the server was waiting for and
	// whether the commit may have happened. Default DefaultCommitTimeout.
	CommitTimeout time.Duration
	// Logger receives lease, pruning and durability events. Default: discard.
	Logger *slog.Logger
}

// Store is an engine.SharedStore on a PostgreSQL schema. Create it with Open.
type Store struct {
	pool     *pgxpool.Pool
	sql      statements
	schema   string
	where    string // the server, without password
	member   string
	number   int64 // the member's number; 0 on a read-only handle
	holder   string
	ttl      time.Duration
	maxKeys  int
	leaseTTL time.Duration
	log      *slog.Logger
	analyzed atomic.Bool // the group's tables have been analyzed once (analyzeNew)
	closed   atomic.Bool
	sqlMode  sqlMode // how runSQL finds refused messages; a benchmark varies it
	// heldLast is set when an Update with Reads.SkipHeld found rows held:
	// the next Update is most likely the batch of the messages on them,
	// and asks for its rows waiting at once rather than with NOWAIT first.
	heldLast atomic.Bool
	auditBuf keptBuffer // the data of the last batch's audit COPY, for the next

	bgCtx    context.Context // cancelled by Close: the background tasks return
	bgCancel context.CancelFunc
	bg       sync.WaitGroup // the background tasks

	stats      shared.Counters
	notDurable string // the setting accepted through store.allow_not_durable; "" when durable
	// syncCommit is synchronous_commit as checkDurable read it, which
	// every batch with sql effects sets back before its commit
	// (restoreSyncCommit); syncCommitWarned is set once a batch's effects
	// were found to have changed it, which is logged once.
	syncCommit       string
	syncCommitWarned atomic.Bool

	commitTimeout time.Duration
	allowAsync    bool        // store.allow_async_replication
	opened        atomic.Bool // Open has returned the handle: a refused connection is logged
	replMu        sync.Mutex
	async         string // how the server replicates asynchronously, as last reported
	hiddenWarned  bool   // walsenders whose state the role may not read were logged
}

var (
	_ engine.SharedStore       = (*Store)(nil)
	_ engine.AuditScanner      = (*Store)(nil)
	_ engine.QuarantineScanner = (*Store)(nil)
	_ engine.ChainScanner      = (*Store)(nil)
	_ engine.StatsReporter     = (*Store)(nil)
)

// Capabilities declares a group's store that runs sql effects in the
// batch's own transaction; a member's handle reads the server's clock.
func (s *Store) Capabilities() engine.Capabilities {
	c := engine.Capabilities{Shared: s, Chains: s, Outbox: s, Claims: s, Keeper: s, Stats: s, Scan: s, SQL: true, Routes: s, Share: s, Adopt: s, Paths: s, Held: s}
	if s.member != "" {
		c.Clock = s
	}
	return c
}

// ServerTime returns the latest reading of the server's clock_timestamp(),
// taken with the member's lease and each renewal (engine.ServerClock).
func (s *Store) ServerTime() (engine.ServerReading, bool) { return s.stats.ServerTime() }

// ApplicationName is the application_name the store's connections give
// the server (pg_stat_activity shows it) when store.url sets none:
// "replayguard" and the member id, if the handle writes as a member.
func ApplicationName(member string) string {
	if member == "" {
		return "replayguard"
	}
	return "replayguard " + member
}

// nameSessions sets the application_name of the store's connections when
// store.url sets none, and warns when a member's name is one the group's
// other members do not look for (endAbandonedSQL): its sessions left in a
// transaction by a dead host would hold their rows until the server's TCP
// keepalive gave up.
func nameSessions(params map[string]string, o Options) {
	name := params["application_name"]
	if name == "" {
		params["application_name"] = ApplicationName(o.Member)
		return
	}
	if o.Member != "" && !strings.HasPrefix(name, ApplicationName("")+" ") {
		o.Logger.Warn("postgres store: store.url names the member's sessions; no other member ends them when they are left in a transaction (name them \"replayguard …\" for that)",
			"member", o.Member, "application_name", name)
	}
}

// CheckURL reports what Open would refuse in url without connecting: a
// URL or connection string the driver cannot read, or a query mode the
// store cannot work with. Its message never shows the password.
func CheckURL(url string) error {
	_, err := parseURL(url)
	return err
}

func parseURL(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	switch cfg.ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec:
		// Exec mode sends every argument typed as text: a number bound for
		// a numeric column of a sql effect would fail every batch instead
		// of being parsed by the column's type.
		return nil, errors.New("default_query_exec_mode=exec types every argument as text, which the sql effects' numeric and boolean columns refuse; " +
			"leave the default (cache_statement), or use cache_describe behind a transaction pooler")
	case pgx.QueryExecModeSimpleProtocol:
		// The simple protocol writes every value into the statement's
		// text: a message's string holding a NUL cannot be sent at all
		// (the batch would fail for ever), and the store's binary columns
		// come back as text it does not read.
		return nil, errors.New("default_query_exec_mode=simple_protocol writes every value into the statement's text, which cannot carry a NUL and returns the store's binary columns as text; " +
			"leave the default (cache_statement), or use cache_describe behind a transaction pooler")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A server that accepts the connection and never answers (stopped,
		// or a host gone behind a listener) would hold every command, and
		// run before it logs a line, for ever.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.MaxConns < minConns {
		// A batch's transaction holds a connection while its decide looks
		// held entries up on another (FindHeld): with one, that lookup
		// would wait for the transaction that waits for it, every batch.
		return nil, fmt.Errorf("pool_max_conns=%d: the store needs at least %d connections (a batch's transaction holds one while it reads on another); leave the default or set %d or more",
			cfg.MaxConns, minConns, minConns)
	}
	return cfg, nil
}

// DefaultConnectTimeout bounds a connection's whole setup when store.url
// sets no connect_timeout (or sets 0).
const DefaultConnectTimeout = 10 * time.Second

// minConns is the fewest connections the store's pool may have.
const minConns = 2

// Open connects to the server, checks that it is durable, creates or
// migrates the schema and, with a member id, takes the member's lease and
// starts the lease renewal and pruning tasks, which Close stops. A lease
// another live process holds fails Open with an error wrapping
// engine.ErrMemberHeld.
func Open(ctx context.Context, o Options) (*Store, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	cfg, err := parseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: store.url: %w", err)
	}
	nameSessions(cfg.ConnConfig.RuntimeParams, o)
	where := redacted(cfg)
	s := &Store{
		sql: newStatements(o.Schema), schema: o.Schema, where: where, member: o.Member,
		ttl: o.TTL, maxKeys: o.MaxEntries, leaseTTL: o.LeaseTTL, log: o.Logger,
		commitTimeout: o.CommitTimeout, allowAsync: o.AllowAsyncReplication,
	}
	if s.member != "" {
		cfg.AfterConnect = s.afterConnect
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: connect to %s: %w", where, err)
	}
	s.pool = pool
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	if err := s.open(ctx, o, where); err != nil {
		s.bgCancel()
		pool.Close()
		return nil, err
	}
	if s.member != "" {
		s.bg.Add(2)
		go s.renewLoop()
		go s.pruneLoop()
	}
	s.opened.Store(true)
	return s, nil
}

func (o *Options) setDefaults() error {
	if o.URL == "" {
		return errors.New("postgres store: store.url is empty")
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if o.TTL == 0 {
		o.TTL = engine.DefaultTTL
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = engine.DefaultMaxEntries
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.CommitTimeout == 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	switch {
	case o.TTL < 0:
		return fmt.Errorf("postgres store: window.ttl %v is negative", o.TTL)
	case o.MaxEntries < 0:
		return fmt.Errorf("postgres store: window.max_entries %d is negative", o.MaxEntries)
	case o.LeaseTTL < 30*time.Millisecond:
		return fmt.Errorf("postgres store: lease ttl %v is too short", o.LeaseTTL)
	case o.CommitTimeout < 0:
		return fmt.Errorf("postgres store: store.commit_timeout %v is negative", o.CommitTimeout)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// open checks the server, the schema and the lease.
func (s *Store) open(ctx context.Context, o Options, where string) error {
	if err := s.pool.Ping(ctx); err != nil {
		var refused refusedConn
		if errors.As(err, &refused) { // afterConnect's own error names the server
			return refused.err
		}
		return fmt.Errorf("postgres store: connect to %s: %w", where, err)
	}
	// A read-only handle commits nothing a crash could lose: it reads a
	// group's store whatever its server keeps (an operator looking into
	// the state of a group it refuses).
	if err := s.checkDurable(ctx, o.AllowNotDurable || s.member == ""); err != nil {
		return err
	}
	if err := migrate(ctx, s.pool, s.schema, s.member == ""); err != nil {
		return fmt.Errorf("postgres store: %s: %w", where, err)
	}
	if s.member == "" {
		return nil
	}
	return s.takeLease(ctx)
}

// checkDurable refuses a server on which a commit that returned could
// still be lost, unless allowed, which the stats then report.
func (s *Store) checkDurable(ctx context.Context, allow bool) error {
	var syncCommit, fsync string
	err := s.pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync')`).Scan(&syncCommit, &fsync)
	if err != nil {
		return fmt.Errorf("postgres store: read the durability settings: %w", err)
	}
	s.syncCommit = syncCommit
	var bad string
	switch {
	case syncCommit == "off":
		bad = "synchronous_commit"
	case fsync == "off":
		bad = "fsync"
	default:
		return nil
	}
	if !allow {
		return fmt.Errorf("postgres store: %s is \"off\": a commit could be lost after the broker was acknowledged "+
			"(set %s = on, or store.allow_not_durable: true to accept that)", bad, bad)
	}
	s.notDurable = bad + "=off"
	s.log.Warn("postgres store is not durable: a crash may lose acknowledged decisions", "setting", bad+"=off")
	return nil
}

// redacted names the server as a URL without its password.
func redacted(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return "postgres://" + c.User + "@" + net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) + "/" + c.Database
}

// Member is the member id this handle writes as; "" when read-only.
func (s *Store) Member() string { return s.member }

// QuarantineBase is the member's number shifted left by 40 bits: the
// member's quarantine ids are this plus its audit positions.
func (s *Store) QuarantineBase() uint64 { return uint64(s.number) << 40 }

// Schema is the schema holding the group's tables.
func (s *Store) Schema() string { return s.schema }

// Close stops the background tasks, releases the outbox and chain claims
// and the lease and closes the connections. Every later call returns engine.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return engine.ErrClosed
	}
	s.bgCancel()
	s.bg.Wait()
	var err error
	if s.member != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.releaseClaims(ctx)
		if _, lerr := s.pool.Exec(ctx, s.sql.release, s.member, s.holder); lerr != nil {
			err = errors.Join(err, fmt.Errorf("postgres store: release the lease of member %q: %w", s.member, lerr))
		}
		cancel()
	}
	s.pool.Close()
	return err
}

// conn returns a pooled connection, or ErrClosed.
func (s *Store) conn(ctx context.Context) (*pgxpool.Conn, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		if s.closed.Load() {
			return nil, engine.ErrClosed
		}
		var refused refusedConn
		if errors.As(err, &refused) {
			return nil, refused.err
		}
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	return c, nil
}

// query runs fn with a pooled connection and returns its error as it is.
func (s *Store) query(ctx context.Context, fn func(c *pgx.Conn) error) error {
	c, err := s.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(c.Conn())
}

// storeErr is an error from the server or the connection, marked as this
// store's.
type storeErr struct{ err error }

func (e storeErr) Error() string { return "postgres store: " + e.err.Error() }
func (e storeErr) Unwrap() error { return e.err }

// dbErr marks an error from the server or the connection as this store's.
func dbErr(err error) error {
	if err == nil {
		return nil
	}
	return storeErr{err}
}

// brokenErr names the server in an error of a connection that broke, or
// reports the cancelled context that broke it.
func (s *Store) brokenErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("postgres store: %w: the transaction was not committed", cerr)
	}
	var se storeErr
	if errors.As(err, &se) {
		err = se.err
	}
	return fmt.Errorf("postgres store: the connection to %s broke, the transaction was not committed: %w", s.where, err)
}
