package web

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
)

// DefaultListen is the address served when Config.Listen is empty: loopback
// only.
const DefaultListen = "127.0.0.1:9780"

// Config configures the HTTP server. The zero value serves plain HTTP on
// DefaultListen, reads open, writes allowed only because the listener is
// loopback.
type Config struct {
	// Listen is the host:port to serve; default DefaultListen.
	Listen string
	// CertFile and KeyFile, both set, serve HTTPS; default plain HTTP.
	CertFile, KeyFile string
	// ClientCAFile, with CertFile and KeyFile, makes every client present
	// a certificate signed by one of its CAs (mutual TLS): a client
	// without one never reaches the API. Default "" (none asked for).
	ClientCAFile string
	// Token, when set, is the bearer token that writes (release, discard)
	// need: the same as one entry of Tokens named "operator" with role
	// RoleOperator. Not together with Tokens. When neither is set, writes
	// are allowed only if Listen is a loopback address, and refused with
	// 403 otherwise. Default empty.
	Token string
	// Tokens are named bearer tokens, each with a role: a viewer may read,
	// an operator may also release and discard, and the audit record of a
	// release or discard names the operator. Names and secrets are unique.
	// Default none.
	Tokens []NamedToken
	// AuthReads makes every read (the API, the event stream and /metrics)
	// need a token too (of either role). /healthz, /readyz and the
	// dashboard's static assets never do. It needs Token or Tokens.
	// Default false.
	AuthReads bool
	// Version is shown on the dashboard; default empty.
	Version string
	// ShutdownTimeout bounds the graceful stop of Run; default 5s.
	ShutdownTimeout time.Duration
	// StoreReadTimeout bounds each API read of a shared store (state,
	// sources, audit, quarantine, outbox, explain): a server that stops
	// answering gets the request a 503 then, rather than a request that
	// waits for as long as the server does. A local store is read without
	// it. Default 5s (config store.read_timeout).
	StoreReadTimeout time.Duration
	// Logger receives request errors; nil discards.
	Logger *slog.Logger
}

// Role is what a token may do.
type Role string

// The roles of a NamedToken.
const (
	// RoleViewer reads (with AuthReads; reads are open without it).
	RoleViewer Role = "viewer"
	// RoleOperator reads, releases and discards.
	RoleOperator Role = "operator"
)

// NamedToken is one bearer token and whom it stands for.
type NamedToken struct {
	// Name is who holds the token; release and discard audit records
	// carry it. Never a metrics label.
	Name string
	// Secret is the bearer token itself.
	Secret string
	// Role is RoleViewer or RoleOperator.
	Role Role
}

// tokens returns the configured tokens, the single Token as one named
// "operator".
func (c *Config) tokens() []NamedToken {
	if c.Token != "" {
		return []NamedToken{{Name: "operator", Secret: c.Token, Role: RoleOperator}}
	}
	return c.Tokens
}

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	if c.StoreReadTimeout == 0 {
		c.StoreReadTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports a configuration that cannot be served.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: listen %q: %v", ErrConfig, c.Listen, err)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%w: TLS needs both cert_file and key_file", ErrConfig)
	}
	if c.ClientCAFile != "" && c.CertFile == "" {
		return fmt.Errorf("%w: client certificates (ca_file) need the server's own cert_file and key_file", ErrConfig)
	}
	if c.Token != "" && len(c.Tokens) > 0 {
		return fmt.Errorf("%w: set Token or Tokens, not both", ErrConfig)
	}
	if c.AuthReads && len(c.tokens()) == 0 {
		return fmt.Errorf("%w: authenticated reads need a token", ErrConfig)
	}
	names := map[string]bool{}
	secrets := map[string]string{}
	for _, t := range c.Tokens {
		switch prev, dup := secrets[t.Secret]; {
		case t.Name == "":
			return fmt.Errorf("%w: a token has no name", ErrConfig)
		case names[t.Name]:
			return fmt.Errorf("%w: token name %q is used twice", ErrConfig, t.Name)
		case t.Role != RoleViewer && t.Role != RoleOperator:
			return fmt.Errorf("%w: token %q: role %q is not %s or %s", ErrConfig, t.Name, t.Role, RoleViewer, RoleOperator)
		case t.Secret == "":
			return fmt.Errorf("%w: token %q is empty", ErrConfig, t.Name)
		case dup: // never the secret itself
			return fmt.Errorf("%w: tokens %q and %q have the same secret: give each its own", ErrConfig, prev, t.Name)
		}
		names[t.Name], secrets[t.Secret] = true, t.Name
	}
	return nil
}

// loopback reports whether addr (host:port) names only loopback interfaces.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Reader is the engine's state as the API shows it. *engine.Engine
// satisfies it; every method must be safe for concurrent use.
// On a shared store State and Sources are the group's, read from the store.
type Reader interface {
	ReadState(ctx context.Context) ([]engine.EntityState, error)
	ReadStateUpTo(ctx context.Context, limit int) ([]engine.EntityState, int, error)
	ReadSources(ctx context.Context) ([]engine.SourceReport, error)
	ReadSourcesUpTo(ctx context.Context, limit int) (engine.SourceSelection, error)
	Stats() engine.Stats
}

// Reviewer resolves held messages on behalf of a named operator ("" when
// writes are open and nobody is named). *engine.Engine satisfies it. A call
// may block while the engine commits a batch.
type Reviewer interface {
	Release(ctx context.Context, id uint64, operator string) (engine.Decision, error)
	Discard(ctx context.Context, id uint64, reason, operator string) (engine.Decision, error)
}

// OutboxReviewer lists the outbox, resolves the entries a downstream
// refused for good and holds a pending one a downstream keeps failing, on
// behalf of a named operator ("" when writes are open). *engine.Engine
// satisfies it; see its RetryForward, DropForward and HoldPending for
// member and the errors. A call may block while the engine commits a
// batch.
type OutboxReviewer interface {
	OutboxReport(ctx context.Context) (engine.OutboxReport, error)
	RetryForward(ctx context.Context, member string, id uint64, reason, operator string) (engine.ForwardResolution, error)
	DropForward(ctx context.Context, member string, id uint64, reason, operator string) (engine.ForwardResolution, error)
	HoldPending(ctx context.Context, member string, id uint64, reason, operator string) (engine.ForwardResolution, error)
}

// Engine is what the server needs of the engine.
type Engine interface {
	Reader
	Reviewer
}

// AuditLog reads the audit log in position order; the store satisfies it.
type AuditLog interface {
	ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error
}

// QuarantineLog reads held messages; the store satisfies it.
type QuarantineLog interface {
	ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error
	Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error)
}

// Deps are the server's collaborators. Engine, Audit and Quarantine are
// required; the rest may be nil.
type Deps struct {
	Engine     Engine
	Audit      AuditLog
	Quarantine QuarantineLog
	// Gatherer serves /metrics; nil: /metrics answers 404.
	Gatherer prometheus.Gatherer
	// Ready reports broker connected and store writable for /readyz; nil:
	// always ready.
	Ready func() bool
	// Store, when set, tells /readyz why the consumer is not ready (a
	// shared store failing, the outbox full) and what to warn about (a
	// store without durable commits, a forward output failing).
	Store func() StoreStatus
	// Hub feeds /api/v1/events and the dashboard's counters; it must be the
	// engine's Observer (or one of them). nil: no event stream.
	Hub *Hub
	// Outbox serves /api/v1/outbox and its retry and drop; nil: they
	// answer 404.
	Outbox OutboxReviewer
	// Forward reports the forward drainer's state for /api/v1/forward and
	// the dashboard; it must be safe for concurrent use and not block (the
	// dashboard polls it). nil: no route forwards in this process.
	Forward func() ForwardStatus
	// Feeds reports the redundant broker paths (mqtt.feeds) for
	// /api/v1/feeds and the dashboard; it must be safe for concurrent use
	// and not block. nil: one path, and /api/v1/feeds lists none.
	Feeds func() []FeedStatus
	// Loss serves /api/v1/store/loss and accept-loss on a shared store;
	// nil: they answer 404.
	Loss LossReviewer
	// Explain serves /api/v1/explain/{entity}: the entity's lineage, read
	// from the audit log, as a value written as JSON. It returns an error
	// wrapping ErrNoLineage when no record changed the entity (404); any
	// other error is a 500. It must be safe for concurrent use. nil: the
	// endpoint answers 404.
	Explain func(ctx context.Context, q ExplainQuery) (any, error)
}

// LossReviewer tells whether the member found its shared store without
// commits it made, and takes an operator's acceptance of what no journal
// holds. *engine.Engine satisfies it; AcceptLoss may block while the
// member decides the journal's batches again.
type LossReviewer interface {
	Loss() *engine.StoreLoss
	AcceptLoss(ctx context.Context, operator string) (engine.StoreLoss, error)
}

// StoreStatus is a shared store's health as /readyz reports it.
type StoreStatus struct {
	Error   string // the last failure, naming the store; "" while it works
	Warning string // e.g. accepted without durable commits (store.allow_not_durable)
}
