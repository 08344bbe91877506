package engine

import (
	"context"
	"fmt"
	"time"
)

// Store persists the engine's windows, entity state, audit log and
// quarantine. Every backend runs the conformance suite in store/storetest,
// which reads Capabilities to choose the cases that apply.
//
// Load and Commit are called by one engine at a time per process; a backend
// must still be safe for concurrent use, since read commands and the HTTP API
// scan it while the engine commits. After Close every method returns
// ErrClosed.
type Store interface {
	// Load returns everything the engine keeps in memory: the live key
	// window in insertion order, every source window, every entity, and
	// the head of the audit chain.
	Load(ctx context.Context) (*Snapshot, error)
	// Commit writes the whole batch atomically and durably: when it returns
	// nil every part is on stable storage, when it returns an error none is.
	// It must not change the batch: a source's window bitmap in it is the
	// engine's own until the engine next changes that window.
	Commit(ctx context.Context, b *Batch) error
	AuditScanner
	QuarantineScanner
	// Capabilities declares what the store does beyond this interface. It
	// is read once, by New and by the commands when the store is opened,
	// and returns the same value every time.
	Capabilities() Capabilities
	Close() error
}

// Capabilities is what a store declares it does beyond Store, each as the
// interface that does it (nil: it does not), the way a database/sql driver's
// optional interfaces are found once at open. A store fills it with itself
// where it supports the part; a wrapper that intercepts one of these
// interfaces declares itself in its place.
type Capabilities struct {
	// Shared is set on a consumer group's store: the store holds the
	// windows and each member its own audit chain. nil: a single-owner
	// store, whose windows the engine holds in memory.
	Shared SharedStore
	// Chains reads every member's audit chain (set with Shared).
	Chains ChainScanner
	// Trim lets audit retention drop the oldest records.
	Trim AuditTrimmer
	// Cursors keeps the audit sinks' cursors.
	Cursors CursorStore
	// Outbox keeps the forward effects' outbox; a route with a forward
	// effect needs it.
	Outbox OutboxStore
	// Claims hands the outboxes of departed members to a live one.
	Claims OutboxClaimer
	// Keeper trims each member's chain and keeps the audit sinks' cursors
	// per chain, on a shared store (set with Shared).
	Keeper ChainKeeper
	// Stats reports a shared store's counters for the metrics.
	Stats StatsReporter
	// Clock reads a shared store's server clock (set with Shared): the
	// group's keys are stamped and aged by it, not by the members' wall
	// clocks. nil: by the members' wall clocks (Options.Now).
	Clock ServerClock
	// SQL says the store runs a batch's sql effects in the batch's own
	// transaction; a route with a sql effect needs it.
	SQL bool
	// Rows reads a single-owner store's sources and entities one row at a
	// time: the engine then loads neither at start and keeps in memory
	// only the rows its recent batches touched (Options.CachedRows). nil:
	// Load returns every row and the engine holds them all.
	Rows RowReader
	// Routes keeps each route's key derivation: New records it the first
	// time and refuses a route whose recorded one differs. nil: the
	// routes are not checked.
	Routes RouteRecorder
	// Scan reads a shared store's sources and entities one row at a time
	// (set with Shared): what the dashboard, the metrics and `sources`
	// read of a group, in memory that does not grow with its rows. nil:
	// they read Load.
	Scan RowScanner
	// Share keeps which members of a group hold its MQTT shared
	// subscription, so that a member stopping leaves it only while
	// another holds it (set with Shared). nil: a member stopping keeps
	// its subscription.
	Share ShareMembership
	// Marks keeps where a single owner's JetStream consumer stood in its
	// stream (StreamMarks). nil: a consumer's position is kept by the
	// server alone, and what a stream loses while run is stopped (a
	// purge, the stream deleted) is not told.
	Marks StreamMarks
	// Adopt hands the MQTT session of a member that is gone while it
	// holds the share group's subscription to one live member, which
	// drains it (set with Share). nil: a gone member's share waits in its
	// session until it returns.
	Adopt ShareAdopter
	// Paths keeps, path by path, the share of a member that consumes
	// several broker paths at once (mqtt.feeds), and hands a gone
	// member's session on each path to one live member, as Share and
	// Adopt do of a member's one session (set with Adopt). nil: such a
	// member's share of each path waits in its session there until it
	// returns.
	Paths SharePaths
	// Held finds the open quarantine entry that holds a message by its
	// key and content, so that a delivery again of a held message is a
	// duplicate of its entry rather than held a second time. nil: every
	// delivery held gets an entry of its own.
	Held HeldFinder
}

// HeldFinder finds open quarantine entries by the key and content of the
// message each holds (QuarantineEntry.Content). A store keeps the index
// in the commit that adds an entry, and takes the entry out of it in the
// one that releases or discards it. A shared store's Update writes no
// entry of a key and content another open entry holds (one another member
// committed after the batch read the index): that is a lost race, and the
// batch, decided again, finds the entry. Safe for concurrent use; on a
// shared store it may be called from inside Update's decide.
type HeldFinder interface {
	// FindHeld returns the lowest id of the open entries that hold a
	// message of key and content; found is false when none does.
	FindHeld(ctx context.Context, key, content Hash) (id uint64, found bool, err error)
}

// ShareMembership keeps, in a group's store, the members that hold the
// group's MQTT shared subscription ($share/GROUP/…). A member joins each
// time the broker grants it the subscription, never before (one recorded
// without it would let the last member holding it leave), and asks to
// leave when it stops gracefully; the broker deals a
// member's share to the others only once it has left, and drops the
// messages of a group none of whose members holds the subscription, so
// the last member never leaves. It is safe for concurrent use, also by
// the members of a group.
type ShareMembership interface {
	// JoinShare records that this handle's member holds the subscription
	// of share group group, on the MQTT session of clientID, until its
	// lease ends, it is granted leave, or it quits. A store that may lose
	// the record (Redis without persistence, restarted) records it again
	// as the lease is renewed.
	JoinShare(ctx context.Context, group, clientID string) error
	// QuitShare records that this handle's member may no longer hold the
	// subscription of share group group (its connection to the broker
	// was lost: its session, and the subscription with it, may be gone),
	// so that no member leaves counting on it; it holds it again once it
	// joins again. The share stays recorded, marked lost at the store's
	// time (the first loss's, while it is not joined again), so that a
	// live member adopts its session once it has stayed lost for a while
	// (ShareAdopter.ClaimAdoptions): a member that still reaches the store
	// but no longer its broker would otherwise leave its share waiting in
	// its session, which the broker goes on dealing it.
	QuitShare(ctx context.Context, group string) error
	// LeaveShare asks, for this handle's member, to leave share group
	// group; it is granted, atomically, only when another member of
	// the group holds a live lease and has not been granted leave
	// itself, and the grant marks this member as leaving. Of members
	// asking at once, the last is never granted.
	LeaveShare(ctx context.Context, group string) (bool, error)
}

// ShareAdopter hands the MQTT session of a member that is gone while the
// store records it as holding a share group's subscription (JoinShare) to
// one live member at a time, which connects with the session's client id,
// unsubscribes the group's filters, decides what the session delivers and
// then records the member out of the group (ShareAdopted): the broker
// would otherwise go on dealing the gone member its share of the group's
// messages, which would wait in its session until it returns.
//
// A member is gone, as for OutboxClaimer, when its lease has run out or
// was given up, or at once when its holder is a process on this host
// that has died. A claim lasts ClaimTTL unless renewed, like an outbox
// claim. A handle whose member's lease another process holds claims
// nothing; a read-only handle fails. Close releases the handle's claims.
// Safe for concurrent use.
type ShareAdopter interface {
	// ClaimAdoptions takes or renews this handle's claims of the
	// sessions of the gone members that hold group's subscription, and
	// of the members whose share has been marked lost (QuitShare) for at
	// least lost by the store's clock, and returns them, sorted by
	// member; never this handle's own member. lost ≤ 0 hands over no
	// member for its loss alone.
	ClaimAdoptions(ctx context.Context, group string, lost time.Duration) ([]Adoption, error)
	// ShareAdopted records a's member out of its share group, while this
	// handle holds a's claim and the member's share is still the one a
	// names (the member has not joined again since); it reports whether
	// it did.
	ShareAdopted(ctx context.Context, a Adoption) (bool, error)
	// ReleaseAdoption gives up this handle's claim of member's session; a
	// claim it does not hold is left alone.
	ReleaseAdoption(ctx context.Context, member string) error
}

// Adoption is a gone member's MQTT session that holds a share group's
// subscription (ShareAdopter).
type Adoption struct {
	Member   string // the member id
	Group    string // the share group
	ClientID string // the session's MQTT client id
	// Holder names the process that recorded the share (its lease
	// holder): a member that returns records its share again under
	// another.
	Holder string
	// Lost is when the member's share was marked lost (QuitShare), by the
	// store's clock; zero when it was not. A member that lost its broker,
	// joined again and lost it again is handed over with another.
	Lost time.Time
	// Path, Brokers and Filters are the path's, for a session on one of
	// a member's paths (SharePaths.PathAdopter; SharePath's fields); none
	// for a member's one session (ShareAdopter of Capabilities.Adopt).
	Path    string
	Brokers []string
	Filters []string
}

// Same reports whether a and b are one adoption: the same member's
// session on the same path, recorded by the same holder, lost at the same
// time (or neither lost).
func (a Adoption) Same(b Adoption) bool {
	return a.Member == b.Member && a.Group == b.Group && a.ClientID == b.ClientID && a.Holder == b.Holder && a.Path == b.Path &&
		a.Lost.Equal(b.Lost)
}

// SharePaths keeps the share of each member that consumes several broker
// paths at once (mqtt.feeds), each path an MQTT session of its own on the
// path's own brokers: path by path, what ShareMembership's JoinShare and
// QuitShare keep of a member's one session, and a ShareAdopter of the
// sessions on one path, by the rules of Capabilities.Adopt (a member is
// gone when its lease is; one live member at a time claims its session on
// a path; a member that takes its lease again has its paths' shares
// cleared). Safe for concurrent use, also by the members of a group.
type SharePaths interface {
	// JoinSharePath records that this handle's member holds p.Group's
	// subscription on path p.Path, on the session of p.ClientID there,
	// until its lease ends, it quits the path, or its session on the path
	// is adopted. A store that may lose the record (Redis without
	// persistence, restarted) records it again as the lease is renewed.
	JoinSharePath(ctx context.Context, p SharePath) error
	// QuitSharePath records that this handle's member may no longer hold
	// group's subscription on path (its connection there was lost): its
	// share there stays recorded, marked lost, as QuitShare keeps a
	// member's one session.
	QuitSharePath(ctx context.Context, path, group string) error
	// PathAdopter returns the ShareAdopter of the members' sessions on
	// path: the Adoptions it hands out name the path, and the brokers and
	// filters the member recorded there.
	PathAdopter(path string) ShareAdopter
}

// SharePath is a member's share on one of its paths (SharePaths).
type SharePath struct {
	Path     string   // the path's name (mqtt.feeds[].name)
	Group    string   // the share group
	ClientID string   // the MQTT client id of the member's session on the path
	Brokers  []string // the path's brokers, passwords redacted
	Filters  []string // the topic filters subscribed in the group, without $share/<group>/
}

// RowScanner reads a store's sources and entities one row at a time.
type RowScanner interface {
	// ScanSources calls fn for each stored source window, one at a time
	// and holding none, until fn returns an error (which it returns), ctx
	// is done, or the windows end: what Sources and the metrics read, in
	// memory that does not grow with the number of sources.
	ScanSources(ctx context.Context, fn func(SourceState) error) error
	// ScanEntities is ScanSources of the stored entities, in name order
	// (strings.Compare): what State reads.
	ScanEntities(ctx context.Context, fn func(EntityState) error) error
	// CountRows returns the number of stored sources and entities.
	CountRows(ctx context.Context) (sources, entities int, err error)
}

// RowReader reads the rows of a single-owner store on demand, so that
// what the engine holds and loads at start does not grow with the number
// of sources and entities (a meter fleet has one source per meter).
type RowReader interface {
	RowScanner
	// LoadKeys is Load without Sources and Entities.
	LoadKeys(ctx context.Context) (*Snapshot, error)
	// ReadRows begins a consistent read of the committed rows, which
	// RowTx.Close ends. The engine ends it before it queues a commit, and
	// never holds two.
	ReadRows(ctx context.Context) (RowTx, error)
}

// HeldRowTx is a RowTx that finds open quarantine entries in its own read,
// as HeldFinder does. While the engine holds a RowTx it looks a held entry
// up there, or, in a RowTx that is not one, closes it first: it never
// holds two reads at once.
type HeldRowTx interface {
	FindHeld(key, content Hash) (id uint64, found bool, err error)
}

// RowTx is one read of a store's committed rows.
type RowTx interface {
	// Source returns the window stored under SourceID; found is false when
	// there is none.
	Source(id string) (s SourceState, found bool, err error)
	// Entity returns the entity stored under name; found is false when
	// there is none.
	Entity(name string) (e EntityState, found bool, err error)
	Close()
}

// AuditScanner reads the audit log in position order.
type AuditScanner interface {
	// ScanAudit calls fn for each record with position >= from, in order,
	// until fn returns an error (which ScanAudit returns) or the log ends.
	ScanAudit(ctx context.Context, from uint64, fn func(AuditRecord) error) error
}

// QuarantineScanner reads held messages.
type QuarantineScanner interface {
	// ScanQuarantine calls fn for each open entry in ID order.
	ScanQuarantine(ctx context.Context, fn func(QuarantineEntry) error) error
	// Quarantined returns one open entry, or ErrNotFound.
	Quarantined(ctx context.Context, id uint64) (QuarantineEntry, error)
}

// Snapshot is the durable state the engine loads at start.
type Snapshot struct {
	Keys      []KeyEntry // live key entries, ordinal ascending
	Sources   []SourceState
	Entities  []EntityState
	AuditHead AuditHead
	NextKey   uint64 // the next key ordinal to assign (> every ordinal ever written)
}

// Batch is one group commit. Positions of Audit records are contiguous and
// follow the stored audit head; Quarantine IDs are audit positions.
type Batch struct {
	Keys       []KeyEntry        // append to the key window
	EvictBelow uint64            // delete key entries with Ordinal < EvictBelow (0: none)
	NextKey    uint64            // the next key ordinal after this batch
	Sources    []SourceState     // upsert by (route, source)
	Entities   []EntityState     // upsert by name
	Audit      []AuditRecord     // append
	Quarantine []QuarantineEntry // add
	Resolved   []uint64          // remove these quarantine entries
	// HeldOpen are the open quarantine entries, committed before this
	// batch, that its duplicates name: deliveries again of the messages
	// they hold (HeldFinder). A shared store writes the batch only while
	// every one of them is still open, and otherwise calls decide again,
	// as after a lost race (SharedStore.Update); Commit ignores it.
	HeldOpen []uint64
	// SQL are the sql effects of the batch's applied messages, in decision
	// order, run in the batch's transaction by a store that declares
	// Capabilities.SQL; every other store gets none.
	SQL []SQLStatement
	// Outbox are the forward effects of the batch's applied messages, in
	// ID order, added to the pending outbox of the member writing the
	// batch ("" on a single-owner store). Each ID is OutboxID of one of
	// the batch's audit positions; a store refuses the batch otherwise
	// (CheckOutbox).
	Outbox []OutboxEntry
	// OutboxHeld moves entries out of a member's pending outbox to the
	// held ones, after this batch's entries are added; an entry no longer
	// pending (delivered meanwhile) is left alone, or, for a hold with
	// Pending set, fails the whole batch with ErrNotFound: nothing of it
	// is written.
	OutboxHeld []OutboxHold
	// OutboxResolved takes held entries out of the held ones, each back
	// into its member's pending outbox with its ID and bytes unchanged
	// (Requeue) or for good, before this batch's entries are added. An
	// entry that is not held when the batch is written (never was, or
	// another writer resolved it first) fails the whole batch with
	// ErrNotFound: nothing of it is written.
	OutboxResolved []OutboxResolve
	// NewRows, when set, counts the rows of Sources and Entities that no
	// committed row holds: the engine knows it from what it read. A store
	// that counts its rows adds these without looking each one up; nil (a
	// batch made by hand) leaves it to look.
	NewRows *RowCount
}

// RowCount is a number of source rows and of entity rows.
type RowCount struct{ Sources, Entities int }

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return len(b.Keys) == 0 && b.EvictBelow == 0 && len(b.Sources) == 0 && len(b.Entities) == 0 &&
		len(b.Audit) == 0 && len(b.Quarantine) == 0 && len(b.Resolved) == 0 &&
		len(b.SQL) == 0 && len(b.Outbox) == 0 && len(b.OutboxHeld) == 0 && len(b.OutboxResolved) == 0
}

// AuditTrimmer is a store whose audit log may start above position 1:
// audit retention archives the oldest records and then drops them from the
// store. What verification needs stays: the position and hash of the last
// dropped record, the store's base, to which the first stored record's prev
// links. ScanAudit then begins after the base.
//
// TrimAudit is called by one retention task at a time; it runs
// concurrently with Commit and with scans, which see the log either before
// or after the trim, never half of it.
type AuditTrimmer interface {
	// AuditBase returns the last dropped record's position and hash; zero
	// when nothing was dropped.
	AuditBase(ctx context.Context) (AuditHead, error)
	// TrimAudit drops every record with position < below, atomically, and
	// makes base its new base. base must be the stored record at below-1
	// (its position and hash), else ErrTrimBase; an open quarantine entry
	// whose record is below below refuses the trim with ErrTrimQuarantine.
	// Nothing changes on error.
	TrimAudit(ctx context.Context, below uint64, base AuditHead) error
}

// CursorStore keeps each audit sink's cursor: the position of the last
// record the sink delivered. A single-owner store keeps it durably next to
// the audit log, so a sink resumes after a restart where it stopped.
//
// Cursor and SetCursor are safe for concurrent use; each sink writes only
// its own name.
type CursorStore interface {
	// Cursor returns the sink's cursor; 0 when it never delivered.
	Cursor(ctx context.Context, name string) (uint64, error)
	// SetCursor records pos as the sink's cursor, durably when it returns
	// nil.
	SetCursor(ctx context.Context, name string, pos uint64) error
	// Cursors returns every stored cursor, by sink name: those of sinks
	// the configuration no longer names too. Audit retention trims the
	// log no further than the lowest.
	Cursors(ctx context.Context) (map[string]uint64, error)
	// ForgetCursor drops the sink's cursor, an operator's word that the
	// sink is gone for good; false when there was none.
	ForgetCursor(ctx context.Context, name string) (bool, error)
}

// StreamMarks keeps, by name, where a stream's consumer stood when it
// last looked (StreamMark): the server moves a durable consumer past what
// a purge removes and deletes it with its stream, so that what the stream
// took while no consumer ran leaves no trace on the server. A
// single-owner store keeps each mark durably, apart from the commits:
// a mark is as old as its At. StreamMark and SetStreamMark are safe for
// concurrent use.
type StreamMarks interface {
	// StreamMark returns the mark kept under name; ok is false when there
	// is none.
	StreamMark(ctx context.Context, name string) (m StreamMark, ok bool, err error)
	// SetStreamMark keeps m under name, in place of the one before,
	// durably when it returns nil.
	SetStreamMark(ctx context.Context, name string, m StreamMark) error
}

// StreamMark is where a stream's consumer stood at At.
type StreamMark struct {
	// Created is when the stream was created: a stream of the same name
	// created at another time is another one, its sequences started over.
	Created time.Time `json:"created"`
	// Decided is the stream sequence through which every message the
	// consumer takes was decided (its ack floor), or told lost.
	Decided uint64 `json:"decided"`
	// End is the highest stream sequence the stream was seen to hold.
	End uint64 `json:"end"`
	// At is when the consumer looked.
	At time.Time `json:"at"`
	// Stopped says that the consumer kept the mark as it stopped, after
	// its last acknowledgement reached the server: nothing was decided
	// after it. A mark kept while it ran is as old as At, and one that
	// stopped without keeping another (a crash) decided more after it.
	Stopped bool `json:"stopped,omitempty"`
}

// NextHead checks that recs follow head contiguously, as a batch's audit
// records must, and returns the chain head after them; a record out of
// place is an error wrapping ErrAuditGap.
func NextHead(head AuditHead, recs []AuditRecord) (AuditHead, error) {
	for _, r := range recs {
		if r.Position != head.Position+1 {
			return AuditHead{}, fmt.Errorf("%w: record at position %d after %d", ErrAuditGap, r.Position, head.Position)
		}
		head = AuditHead{Position: r.Position, Hash: r.Hash}
	}
	return head, nil
}

// QuarantineCounter is a store that counts its open quarantine entries
// without reading them: a quarantine of large payloads is counted at every
// metrics scrape and every page of its listing.
type QuarantineCounter interface {
	CountQuarantine(ctx context.Context) (int, error)
}
