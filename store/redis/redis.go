package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "{replayguard}:"

// DefaultLeaseTTL is how long a member's lease holds unless renewed, when
// Options.LeaseTTL is zero.
const DefaultLeaseTTL = 15 * time.Second

// schemaVersion is the layout of the keys described in keys.go. Open writes
// it under a new prefix and refuses a prefix written with a newer one.
// Version 2 writes sources and entities as engine's binary rows, not JSON;
// version 3 writes row format 2, whose bitmaps are runs; version 4 row
// format 3, whose windows of a source that sends in order have no bitmap;
// version 5 row format 4 where a source's retired epoch keeps its bitmap,
// and for every entity (each field with its writer's source); version 6
// audit records that carry connected (the first delivery of each broker
// connection), which a build from before decodes without it, finding the
// record's hash wrong; version 7 row format 5 for a source with a
// Sparkplug session (binary, each alias table once); version 8 shares
// marked lost (sharelost, sharepathslost), which a build from before
// neither counts out of its group nor clears as its member joins again;
// version 9 every open entry of a message with a key in the held index,
// those held before it indexed at the raise (heldSince), which a build
// from before writes entries without, and opens a second entry of a
// message another member holds at the same moment. Each reads the rows of
// the versions before, and keeps a build that reads only those out.
const schemaVersion = 9

// openTimeout bounds each step of Open that talks to the server.
const openTimeout = 10 * time.Second

// DefaultWaitTimeout bounds each WAIT for the replicas when
// Options.WaitTimeout is zero.
const DefaultWaitTimeout = 2 * time.Second

// DefaultCommitTimeout bounds one Update or Commit when
// Options.CommitTimeout is zero.
const DefaultCommitTimeout = 30 * time.Second

// Options configure Open. The zero value of every field but URL means its
// documented default.
type Options struct {
	// URL is the server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS; or the Sentinels that know it:
	// redis+sentinel://[user:password@]host1:26379,host2:26379/MASTERNAME[/DB]
	// (the user and password are the master's). Required.
	URL string
	// Member is the member id whose audit chain this handle writes. Empty
	// opens a read-only handle: it takes no lease and refuses Commit and
	// Update. Default "".
	Member string
	// Prefix is put before every key the store writes. It must hold exactly
	// one non-empty hash tag ("{group}"), so that a group's keys share one
	// Redis Cluster slot. Default DefaultPrefix.
	Prefix string
	// TTL bounds the age of an idempotency key: a key expires TTL after it
	// was written. It must be the engine's window TTL (or longer): a key
	// that expires sooner lets its replay through. Default
	// engine.DefaultTTL.
	TTL time.Duration
	// MaxEntries bounds how many idempotency keys the group keeps; the
	// pruning task removes the oldest (by ordinal) beyond it. Default
	// engine.DefaultMaxEntries.
	MaxEntries int
	// LeaseTTL is how long the member's lease holds unless renewed; it is
	// renewed every LeaseTTL/3. Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// AllowNotDurable opens a server whose settings could lose an
	// acknowledged write (store.allow_not_durable); SharedStats then names
	// the setting. Default false: Open refuses such a server.
	AllowNotDurable bool
	// WaitReplicas is how many replicas must acknowledge each update (WAIT)
	// before it counts as committed (config store.wait_replicas). Open
	// refuses a server with fewer replicas connected. Default 0: none.
	WaitReplicas int
	// WaitTimeout bounds each WAIT; a timeout is a failed commit (nothing
	// acknowledged; the batch is retried). Default DefaultWaitTimeout (2s).
	WaitTimeout time.Duration
	// AllowAsyncReplication opens a server with connected replicas and
	// WaitReplicas 0 (config store.allow_async_replication): SharedStats'
	// AsyncReplication then says so. Default false: refused.
	AllowAsyncReplication bool
	// CommitTimeout bounds one Update or Commit. Default
	// DefaultCommitTimeout (30s).
	CommitTimeout time.Duration
	// Logger receives lease, pruning and durability events. Default: discard.
	Logger *slog.Logger
}

func (o *Options) setDefaults() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
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
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.CommitTimeout == 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case o.URL == "":
		return errors.New("redis store: store.url is empty")
	case o.TTL < time.Millisecond:
		return fmt.Errorf("redis store: window ttl %v is below a millisecond", o.TTL)
	case o.MaxEntries < 0:
		return fmt.Errorf("redis store: window max_entries %d is negative", o.MaxEntries)
	case o.LeaseTTL < 30*time.Millisecond:
		return fmt.Errorf("redis store: lease ttl %v is below 30ms", o.LeaseTTL)
	case o.WaitReplicas < 0:
		return fmt.Errorf("redis store: store.wait_replicas %d is negative", o.WaitReplicas)
	case o.WaitTimeout < time.Millisecond:
		return fmt.Errorf("redis store: wait timeout %v is below a millisecond (WAIT counts milliseconds)", o.WaitTimeout)
	case o.CommitTimeout < 0:
		return fmt.Errorf("redis store: commit timeout %v is negative", o.CommitTimeout)
	}
	return checkPrefix(o.Prefix)
}

// checkPrefix holds the prefix to exactly one non-empty hash tag: Redis
// Cluster hashes the text between the first "{" and the next "}", and one
// group's keys must share a slot for its scripts to run.
func checkPrefix(p string) error {
	open, end := strings.IndexByte(p, '{'), strings.IndexByte(p, '}')
	if strings.Count(p, "{") != 1 || strings.Count(p, "}") != 1 || open < 0 || end < open+2 {
		return fmt.Errorf("redis store: store.prefix %q must contain exactly one non-empty hash tag such as {replayguard}, "+
			"so that the group's keys share one Redis Cluster slot", p)
	}
	return nil
}

// Store is a shared engine.Store on a Redis server. Create it with Open.
type Store struct {
	c       *goredis.Client
	bufs    argBufs // of writes, kept between them
	opts    Options
	k       keys
	url     string // redacted, for errors
	member  string
	holder  string // this handle's lease holder: "place pid nonce" (shared.NewHolder)
	qbase   uint64
	log     *slog.Logger
	closed  atomic.Bool
	stop    context.CancelFunc
	tasks   sync.WaitGroup
	stats   shared.Counters
	wake    wake
	durable string // "" when durable, else the settings that are not
	repl    replication
	shareMu sync.Mutex // orders the writes of the member's share, renewals' among them
	share   string     // the share group the member holds (JoinShare), "" none
	// shareSession is the session holding share: holder, newline, client id.
	shareSession string
	// paths are the shares of the member's paths it holds (JoinSharePath),
	// by path: each one's record in its sharepaths hash (pathRecord).
	paths map[string]string
	// adoptPaths are the paths whose sessions this handle claimed
	// (PathAdopter), whose claims Close releases; under shareMu.
	adoptPaths map[string]bool
}

var (
	_ engine.SharedStore       = (*Store)(nil)
	_ engine.AuditScanner      = (*Store)(nil)
	_ engine.QuarantineScanner = (*Store)(nil)
	_ engine.ChainScanner      = (*Store)(nil)
	_ engine.StatsReporter     = (*Store)(nil)
)

// Capabilities declares a group's store; a member's handle reads the
// server's clock.
func (s *Store) Capabilities() engine.Capabilities {
	c := engine.Capabilities{Shared: s, Chains: s, Outbox: s, Claims: s, Keeper: s, Stats: s, Scan: s, Routes: s, Share: s, Adopt: s, Paths: s, Held: s}
	if s.member != "" {
		c.Clock = s
	}
	return c
}

// ServerTime returns the latest reading of the server's clock (TIME),
// taken with the member's lease and each renewal (engine.ServerClock).
func (s *Store) ServerTime() (engine.ServerReading, bool) { return s.stats.ServerTime() }

// ClientName is the name the store's connections give the server (CLIENT
// SETNAME; CLIENT LIST shows it) when store.url sets none: "replayguard" and
// the member id, if the handle writes as a member. Redis names hold no
// spaces: one in the member id becomes '_'.
func ClientName(member string) string {
	if member == "" {
		return "replayguard"
	}
	return "replayguard-" + strings.ReplaceAll(member, " ", "_")
}

// Open connects to the server, checks that it is durable, creates or checks
// the schema under the prefix and, for a member, takes its lease and starts
// the lease renewal, pruning and lock release listening tasks, which Close
// stops. When another live process holds the member's lease, Open fails
// with an error wrapping engine.ErrMemberHeld.
func Open(ctx context.Context, o Options) (*Store, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	s := &Store{opts: o, k: newKeys(o.Prefix), url: redactURL(o.URL), member: o.Member, log: o.Logger, bufs: make(argBufs, 2)}
	var err error
	if s.c, err = s.client(); err != nil {
		return nil, err
	}
	goredis.SetLogger(clientLog{o.Logger}) // the client's own complaints (dial failures) go where ours do
	if err := s.open(ctx); err != nil {
		_ = s.c.Close()
		return nil, err
	}
	if s.member != "" {
		tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		s.stop = stop
		s.tasks.Add(3)
		go s.renewLoop(tctx)
		go s.pruneLoop(tctx)
		go s.wakeLoop(tctx)
	}
	s.log.Debug("store opened", "url", s.url, "prefix", o.Prefix, "member", s.member)
	return s, nil
}

func (s *Store) open(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis store: cannot reach %s: %w", s.url, err)
	}
	// A read-only handle commits nothing a crash could lose: it reads a
	// group's store whatever its server keeps (an operator looking into
	// the state of a group it refuses).
	allow := s.opts.AllowNotDurable || s.member == ""
	problem, err := checkDurable(ctx, s.c)
	if err != nil {
		if !allow {
			return err
		}
		problem = err.Error() // the opt-out covers a server that cannot tell
	}
	if problem != "" {
		if !allow {
			return fmt.Errorf("redis store: %s at %s: a commit could be lost after the broker was acknowledged "+
				"(fix the setting, or set store.allow_not_durable: true to accept that)", problem, s.url)
		}
		s.durable = problem
		s.log.Warn("store is not durable: a commit could be lost after the broker was acknowledged", "url", s.url, "setting", problem)
	}
	if s.member != "" { // a read-only handle writes nothing a failover could lose
		if err := s.checkReplicationAtOpen(ctx); err != nil {
			return err
		}
	}
	if err := s.schema(ctx); err != nil {
		return err
	}
	if s.member == "" {
		return nil
	}
	return s.acquire(ctx)
}

// CheckURL reports what Open would refuse in url without connecting: a
// URL the client cannot read, a port out of range (which the client finds
// only when it dials), or a list of Sentinels not in their form. Its
// message never shows the password.
func CheckURL(url string) error {
	if isSentinelURL(url) {
		if _, err := parseSentinelURL(url); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "redis store: store.url "))
		}
		return nil
	}
	copt, err := goredis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("%s: %w", redactURL(url), err)
	}
	if copt.Network == "tcp" {
		_, port, err := net.SplitHostPort(copt.Addr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: port %q is not from 1 to 65535", redactURL(url), port)
		}
	}
	return nil
}

// client makes the Redis client for store.url: one server, or the master
// that Sentinels name. A member's client checks the replication of every
// connection it opens (onConnect).
func (s *Store) client() (*goredis.Client, error) {
	o := &s.opts
	if isSentinelURL(o.URL) {
		fo, err := parseSentinelURL(o.URL)
		if err != nil {
			return nil, err
		}
		s.url = fo.redacted
		fo.opts.ContextTimeoutEnabled = true
		fo.opts.ClientName = ClientName(o.Member)
		fo.opts.ReadTimeout = s.readTimeout(fo.opts.ReadTimeout)
		if s.member != "" {
			fo.opts.OnConnect = s.onConnect
		}
		return goredis.NewFailoverClient(fo.opts), nil
	}
	copt, err := goredis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("redis store: store.url %s: %w", redactURL(o.URL), err)
	}
	// A command lost on a broken connection is sent again. That is safe for
	// the update script too: a repeat of one that ran finds the chain head
	// moved and writes nothing.
	copt.ContextTimeoutEnabled = true
	if copt.ClientName == "" {
		copt.ClientName = ClientName(o.Member)
	}
	copt.ReadTimeout = s.readTimeout(copt.ReadTimeout)
	if s.member != "" {
		copt.OnConnect = s.onConnect
	}
	return goredis.NewClient(copt), nil
}

// schema writes the layout version under a new prefix, or checks the one
// there. Several members may run it at once: SET NX lets one write it. A
// read-only handle writes nothing under a prefix that has one, so that it
// opens on a replica; a member raises an older version to this one.
func (s *Store) schema(ctx context.Context) error {
	v, err := s.c.Get(ctx, s.k.schema).Result()
	if errors.Is(err, goredis.Nil) {
		if s.member == "" { // a read-only handle writes nothing: no member created the group yet
			return nil
		}
		if err := s.c.SetNX(ctx, s.k.schema, schemaVersion, 0).Err(); err != nil {
			return s.fail("create schema", err)
		}
		v, err = s.c.Get(ctx, s.k.schema).Result()
	}
	if err != nil {
		return s.fail("read schema version", err)
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 1:
		return fmt.Errorf("redis store: %s holds %q, not a schema version: store.prefix %q names keys of something else",
			s.k.schema, v, s.opts.Prefix)
	case n > schemaVersion:
		return fmt.Errorf("redis store: the keys under store.prefix %q have schema version %d, newer than this build's %d: "+
			"upgrade replayguard", s.opts.Prefix, n, schemaVersion)
	case n < schemaVersion && s.member != "":
		// A member of the earlier build still running would go on
		// deciding on rows it no longer reads right.
		if err := s.refuseLiveMembers(ctx, n); err != nil {
			return err
		}
		if n < heldSince {
			if err := s.backfillHeld(ctx); err != nil {
				return err
			}
		}
		// The rows of versions 1 (JSON), 2 (format 1) and 3 (format 2)
		// are read as they are and rewritten when next written: only
		// the number changes, and only upward: a newer build's member
		// may have raised it past this one's meanwhile.
		now, err := raiseSchemaScript.Run(ctx, s.c, []string{s.k.schema}, schemaVersion).Int()
		if err != nil {
			return s.fail("migrate schema", err)
		}
		if now > schemaVersion {
			return fmt.Errorf("redis store: the keys under store.prefix %q have schema version %d, newer than this build's %d: "+
				"upgrade replayguard", s.opts.Prefix, now, schemaVersion)
		}
	}
	return nil
}

// ErrMembersRunning is returned by Open when the keys have an older schema
// version than this build's and members hold their leases: members of an
// earlier build still run, and the version is left as it is.
var ErrMembersRunning = errors.New("members of the group are running")

// refuseLiveMembers fails, naming them, when members hold their leases
// under a prefix of version v, the opening member's own included: its
// holder is another process, which this one could not take the lease from
// either. A lease whose process died on this host holds nothing.
func (s *Store) refuseLiveMembers(ctx context.Context, v int) error {
	ids, err := s.c.HKeys(ctx, s.k.members).Result()
	if err != nil {
		return s.fail("read the members before raising the schema version", err)
	}
	slices.Sort(ids)
	cmds, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, id := range ids {
			p.Get(ctx, s.k.lease(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return s.fail("read the members' leases before raising the schema version", err)
	}
	var live []string
	for i, c := range cmds {
		holder, err := c.(*goredis.StringCmd).Result()
		if err == nil && !shared.DeadHere(holder) {
			live = append(live, ids[i])
		}
	}
	if len(live) > 0 {
		return fmt.Errorf("redis store: %w: the keys under store.prefix %q have schema version %d, and %s of an earlier build still running: "+
			"stop every member of the group, then start this build's to raise it to version %d "+
			"(a killed member holds its lease until it runs out, %s by default)",
			ErrMembersRunning, s.opts.Prefix, v, shared.NamedMembers(live), schemaVersion, DefaultLeaseTTL)
	}
	return nil
}

// raiseSchemaScript sets KEYS[1] to the version ARGV[1] unless it holds
// a higher one, and returns the version it holds then.
var raiseSchemaScript = goredis.NewScript(`
local held = redis.call('GET', KEYS[1])
local v = tonumber(held)
if held and not v then
	return redis.error_reply('the schema key holds ' .. held .. ', not a version')
end
local want = tonumber(ARGV[1])
if v == nil or v < want then
	redis.call('SET', KEYS[1], ARGV[1])
	return want
end
return v
`)

// Member is the member id whose chain this handle writes; "" when read-only.
func (s *Store) Member() string { return s.member }

// QuarantineBase is the member's number shifted left by 40 bits: its
// quarantine ids are this plus its audit positions. Zero when read-only.
func (s *Store) QuarantineBase() uint64 { return s.qbase }

// Close stops the background tasks, releases the outbox and chain claims
// and the lease and closes the connections. Every later call returns engine.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return engine.ErrClosed
	}
	if s.stop != nil {
		s.stop()
		s.tasks.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
		defer cancel()
		if err := s.releaseClaims(ctx); err != nil {
			s.log.Warn("release the outbox and chain claims", "member", s.member, "err", err)
		}
		if err := releaseScript.Run(ctx, s.c, []string{s.k.lease(s.member)}, s.holder).Err(); err != nil {
			s.log.Warn("release the member's lease", "member", s.member, "err", err)
		}
		_ = releaseScript.Run(ctx, s.c, []string{s.k.pruneLock}, s.holder).Err()
	}
	if err := s.c.Close(); err != nil {
		return fmt.Errorf("redis store: close: %w", err)
	}
	s.log.Debug("store closed", "url", s.url, "member", s.member)
	return nil
}

// check returns engine.ErrClosed after Close.
func (s *Store) check() error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	return nil
}

// writer returns an error for a read-only handle.
func (s *Store) writer(op string) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.member == "" {
		return fmt.Errorf("redis store: %s: the store was opened read-only (no store.member)", op)
	}
	return nil
}

// fail wraps a server error, naming the server; after Close it is
// engine.ErrClosed.
func (s *Store) fail(op string, err error) error {
	if s.closed.Load() || errors.Is(err, goredis.ErrClosed) {
		return engine.ErrClosed
	}
	if r, ok := errors.AsType[refusal](err); ok {
		return r.error
	}
	return fmt.Errorf("redis store: %s at %s: %w", op, s.url, err)
}

// redactURL returns u without its password.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	return p.Redacted()
}

// clientLog routes what the Redis client logs (a failed dial during an
// outage, a pool's trouble) to the store's logger instead of the standard
// library's default one. The client's logger is one for the process: the
// store opened last names where it goes.
type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis store: "+fmt.Sprintf(format, v...))
}
