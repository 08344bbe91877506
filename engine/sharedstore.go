package engine

import (
	"context"
	"errors"
	"time"
)

// SharedStore is a store the members of a consumer group share. The store
// is the authority (DESIGN.md, "Stores and consumer groups"): for each
// batch the engine names the rows it touches, the store reads them under
// its concurrency control, the engine decides on exactly those rows with
// the same code as on a single-owner store, and the store writes the
// resulting batch in the same atomic unit as the reads.
//
// Through a SharedStore the engine keeps no window state between batches.
// Load returns the group's sources and entities and this member's audit
// head; it leaves Keys empty (the group's key table is the store's to
// prune) and NextKey zero. Commit writes a batch without reading (the
// conformance suite uses it); EvictBelow and NextKey mean nothing to a
// shared store.
//
// Each member writes its own audit chain (every record names the member),
// fenced by a lease the store takes when it is opened: a second live
// process under the same member id is refused with ErrMemberHeld.
type SharedStore interface {
	Store
	// Member is the member id whose audit chain this handle writes.
	Member() string
	// Head returns the head of this member's audit chain.
	Head(ctx context.Context) (AuditHead, error)
	// QuarantineBase is added to this member's audit positions to form its
	// quarantine ids, unique in the group.
	QuarantineBase() uint64
	// Update reads the rows r names, calls decide with them and writes the
	// batch decide returns, atomically with the reads: when it returns nil
	// the batch is durable and was decided on rows no other member changed
	// before it committed. When another member won a race in between (a
	// key or row inserted first, a version changed), Update calls decide
	// again on fresh rows, a bounded number of times; only the batch of the
	// last call is written. A key in the batch that is stored with a Time
	// at or after r.KeyCutoff is such a lost race: it is never overwritten.
	// A Resolved quarantine entry that is no longer open fails Update with
	// ErrNotFound and nothing is written; an error from decide is returned
	// as it is, with nothing written (ErrReadAgain is not a failure). A
	// store whose server cannot hold the locks of r's rows at once fails
	// with ErrLockTable, nothing written.
	Update(ctx context.Context, r *Reads, decide func(*Rows) (*Batch, error)) error
}

// Reads names the rows one batch touches.
type Reads struct {
	Keys      []Hash   // idempotency keys, ascending, unique
	Sources   []string // SourceState.ID() of each (route, source), ascending, unique
	Entities  []string // entity names, ascending, unique
	KeyCutoff int64    // unix nanoseconds: a key applied before it has expired
	// SkipHeld lets the store leave out a source or entity row that
	// another member's Update holds, instead of waiting for it, and name
	// it in Rows.Held: the engine then decides only the deliveries that
	// touch none of them, and the rest in a batch of their own. A store
	// that cannot tell a held row waits for it, as without SkipHeld.
	SkipHeld bool
}

// Rows are the stored rows a batch's Reads name; absent rows are left out.
type Rows struct {
	Keys     []KeyEntry // may include expired entries: the engine skips them
	Sources  []SourceState
	Entities []EntityState
	// Refused are the keys whose sql effects the store refused on an
	// earlier call of this Update's decide: each such message is
	// quarantined with its reason instead of applied.
	Refused SQLRefusals
	// Held names the rows left out because another Update held them
	// (Reads.SkipHeld): neither read nor locked, so the batch must not
	// touch them.
	Held HeldRows
}

// HeldRows are the source and entity rows an Update with Reads.SkipHeld
// left out because another Update held them.
type HeldRows struct {
	Sources  []string // SourceState.ID()
	Entities []string
}

// Empty reports whether no row was left out.
func (h HeldRows) Empty() bool { return len(h.Sources)+len(h.Entities) == 0 }

// ChainScanner reads the per-member audit chains of a shared store.
type ChainScanner interface {
	// Chains returns every member's chain head, ordered by member id.
	Chains(ctx context.Context) ([]Chain, error)
	// ScanChain is ScanAudit over one member's chain.
	ScanChain(ctx context.Context, member string, from uint64, fn func(AuditRecord) error) error
}

// Chain is one member's audit chain.
type Chain struct {
	Member string
	Head   AuditHead
}

// ChainKeeper is what audit retention and the audit sinks need of a shared
// store, chain by chain: each member trims, archives and streams its own
// audit chain, and a live member takes over the chain of one that is gone
// (its lease expired), as it takes over its outbox.
//
// The methods on one member's chain behave as AuditTrimmer and
// CursorStore do on a single-owner store's log. Safe for concurrent use.
type ChainKeeper interface {
	ChainBaser
	// TrimChain drops every record of member's chain with position <
	// below, atomically, and makes base its new base: base must be the
	// stored record at below-1 (ErrTrimBase otherwise), and an open
	// quarantine entry of that member whose record is below below refuses
	// the trim with ErrTrimQuarantine. A chain whose claim (ClaimChains)
	// another handle holds, unexpired, is refused with ErrChainClaimed: a
	// handle trims a chain no one claims, or one it claims itself.
	// ScanChain then begins after the base. Nothing changes on error. A
	// read-only handle fails.
	TrimChain(ctx context.Context, member string, below uint64, base AuditHead) error
	// ChainCursor returns the cursor of sink on member's chain: the
	// position of the last record the sink delivered; 0 when none.
	ChainCursor(ctx context.Context, member, sink string) (uint64, error)
	// SetChainCursor records pos as that cursor, durably when it returns
	// nil, unless the cursor is already past it (a handle whose claim of
	// the chain ended cannot take it back). A member the group never had
	// fails it with ErrNotFound, a read-only handle fails.
	SetChainCursor(ctx context.Context, member, sink string, pos uint64) error
	// SetChainCursorAt is SetChainCursor for a sink that delivered the
	// record at: it records at.Position only if member's chain holds that
	// very record (its hash) there, atomically, and fails with
	// ErrCursorRecord otherwise. A batch read before a failover to a
	// standby that lacked its records thus cannot leave a cursor past
	// records the chain then holds at those positions and the sink never
	// delivered.
	SetChainCursorAt(ctx context.Context, member, sink string, at AuditHead) error
	// ChainCursors returns every cursor stored on member's chain, by sink
	// name: those of sinks no live process configures too. Audit
	// retention trims the chain no further than the lowest.
	ChainCursors(ctx context.Context, member string) (map[string]uint64, error)
	// ForgetSink drops sink's cursor on every member's chain and returns
	// the members whose chain had one, sorted: an operator's word that
	// the sink is gone for good, so that its cursors no longer hold
	// retention back. A read-only handle fails.
	ForgetSink(ctx context.Context, sink string) ([]string, error)
	// QuarantineBases returns every member's quarantine base (see
	// SharedStore.QuarantineBase), by member id: an open entry's id minus
	// its member's base is its record's position in that member's chain.
	QuarantineBases(ctx context.Context) (map[string]uint64, error)
	// ClaimChains takes or renews this handle's chain claims and returns,
	// sorted, the members whose chains it may trim and stream now: the
	// claim of its own member, unless another live handle holds it; and
	// that of every other member with a chain whose member lease is
	// expired or free, when that claim is free, expired or already this
	// handle's. The rules are OutboxClaimer's (a claim lasts ClaimTTL
	// unless renewed; a member that holds its lease again gets its claim
	// back once this handle stops renewing it, within ClaimTTL; a handle
	// whose member's lease another process took claims nothing; Close
	// releases the handle's claims), with chains in place of outboxes.
	// A read-only handle fails.
	ClaimChains(ctx context.Context) ([]string, error)
	// ReleaseChain gives up this handle's claim on member's chain; a claim
	// it does not hold is left alone.
	ReleaseChain(ctx context.Context, member string) error
}

// ChainBaser says where audit retention left each member's chain of a
// shared store beginning.
type ChainBaser interface {
	// ChainBase returns the last dropped record of member's chain (its
	// position and hash); zero when nothing was dropped or the member has
	// no chain.
	ChainBase(ctx context.Context, member string) (AuditHead, error)
}

// ErrMemberHeld is returned when a shared store is opened under a member
// id whose lease another live process holds.
var ErrMemberHeld = errors.New("replayguard: member id held by another live process")

// ErrContention is returned by Update when other members kept winning the
// races for its rows through every retry.
var ErrContention = errors.New("replayguard: batch lost every retry to other members")

// ErrLockTable is returned by Update, with nothing written, when the
// store's server could not hold the locks of every row the batch names at
// once (PostgreSQL: "out of shared memory", its lock table full); the
// error names the setting that bounds them. The engine then decides the
// batch in two parts, each split again while it fails so, down to one
// delivery, which fails as any store error does when even its rows do not
// fit.
var ErrLockTable = errors.New("replayguard: the store's server cannot hold the locks of the batch's rows")

// SharedStats are a shared store's counters since it was opened, for the
// metrics (a shared store implements StatsReporter).
type SharedStats struct {
	Updates       uint64  // batches Update wrote
	Retries       uint64  // decide calls repeated after another member won a race
	Failures      uint64  // Update calls that returned an error
	UpdateSeconds float64 // time spent in Update calls that wrote
	Rows          uint64  // audit records written (batch sizes add up to it)
	LockWaits     uint64  // waits for a row lock, where the store shows them
	HeldRows      uint64  // rows an Update left out because another member held them (Reads.SkipHeld)
	Durable       bool    // false when opened with a named durability opt-out
	NotDurable    string  // the setting that makes it so, when !Durable
	// AsyncReplication, when not empty, says how the store's server
	// replicates without making a commit wait for a replica (accepted
	// through store.allow_async_replication): a failover may lose
	// acknowledged commits, which only the member's journal brings back.
	AsyncReplication string
	LastError        string        // the last Update or lease error, "" once one succeeds
	LeaseError       string        // the last lease renewal's error, "" once one succeeds
	LeaseExpires     time.Time     // when this member's lease ends unless renewed
	LeaseRenewed     time.Time     // this process's clock when the lease was last taken or renewed
	LeaseTTL         time.Duration // how long a renewal holds the lease
	// Fenced is set for good by the first error that said another
	// process holds this member's lease (ErrMemberHeld after the store
	// opened): this handle must write nothing as the member again.
	Fenced string
	// ClockOffset is this member's clock less the store server's, as the
	// last lease renewal measured it (within ClockUncertainty, half its
	// round trip), when ClockMeasured is set: the member's audit records
	// carry its wall time, the group's keys the server's (ServerClock).
	ClockOffset, ClockUncertainty time.Duration
	ClockMeasured                 time.Time
}

// StatsReporter is implemented by shared stores.
type StatsReporter interface {
	SharedStats() SharedStats
}
