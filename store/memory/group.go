package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Group is a shared store in memory: the reference for the shared
// conformance suite and for engine tests of a consumer group, whose members
// are handles on one Group. One lock serialises every Update, so each is
// trivially decided on rows nobody changed.
type Group struct {
	mu         sync.Mutex
	keys       map[engine.Hash]engine.KeyEntry
	sources    map[string]engine.SourceState
	entities   map[string]engine.EntityState
	chains     map[string]*chain
	quarantine map[uint64]engine.QuarantineEntry
	heldMu     sync.Mutex        // guards held alone: FindHeld runs inside Update, under mu
	held       heldIndex         // the open entries by key and content
	numbers    map[string]uint64 // member id → its number, never reused
	members    map[string]bool   // member ids with an open handle
	ttl        time.Duration
	maxEntries int
	outboxes   map[string]*outbox   // by member
	claims     map[claimKey]claim   // outbox and chain claims
	cursors    map[chainSink]uint64 // audit sinks' cursors, per member's chain
	claimTTL   time.Duration
	routes     map[string][]byte // route name → its key derivation
	shares     map[string]string // member id → the share group it holds, while its handle is open
}

// chain is one member's audit chain: its records from base on (the pages
// below base are dropped by TrimChain; see auditLog), its head and its
// base, the last record audit retention dropped. The head stays where the
// member's last batch left it, also when every record was trimmed.
type chain struct {
	log  auditLog
	head engine.AuditHead
	base engine.AuditHead
}

// NewGroup returns an empty group store whose key window is bounded by ttl
// and maxEntries (the engine's defaults when zero).
func NewGroup(ttl time.Duration, maxEntries int) *Group {
	return &Group{keys: map[engine.Hash]engine.KeyEntry{}, sources: map[string]engine.SourceState{},
		entities: map[string]engine.EntityState{}, chains: map[string]*chain{},
		quarantine: map[uint64]engine.QuarantineEntry{}, held: heldIndex{}, numbers: map[string]uint64{}, members: map[string]bool{},
		ttl: cmp.Or(ttl, engine.DefaultTTL), maxEntries: cmp.Or(maxEntries, engine.DefaultMaxEntries),
		outboxes: map[string]*outbox{}, claims: map[claimKey]claim{}, cursors: map[chainSink]uint64{}, claimTTL: DefaultClaimTTL}
}

// Member is one member's handle on a Group.
type Member struct {
	g      *Group
	member string // "" for a read-only handle
	base   uint64
	closed bool // under g.mu
}

var (
	_ engine.SharedStore       = (*Member)(nil)
	_ engine.AuditScanner      = (*Member)(nil)
	_ engine.QuarantineScanner = (*Member)(nil)
	_ engine.ChainScanner      = (*Member)(nil)
)

// ErrReadOnly is returned by the methods that write, on a handle opened
// without a member id.
var ErrReadOnly = errors.New("memory: a read-only handle writes nothing")

// Capabilities declares a group's store.
func (m *Member) Capabilities() engine.Capabilities {
	return engine.Capabilities{Shared: m, Chains: m, Outbox: m, Claims: m, Keeper: m, Scan: m, Routes: m, Share: m, Held: m}
}

// Open returns a handle writing member's chain, or a read-only handle when
// member is empty. A member id with an open handle is refused.
func (g *Group) Open(member string) (*Member, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if member == "" {
		return &Member{g: g}, nil
	}
	if g.members[member] {
		return nil, fmt.Errorf("%w: %q", engine.ErrMemberHeld, member)
	}
	n, ok := g.numbers[member]
	if !ok {
		n = uint64(len(g.numbers) + 1)
		g.numbers[member] = n
	}
	g.members[member] = true
	return &Member{g: g, member: member, base: n << 40}, nil
}

// Member is the member id; empty for a read-only handle.
func (m *Member) Member() string { return m.member }

// QuarantineBase offsets this member's quarantine ids.
func (m *Member) QuarantineBase() uint64 { return m.base }

// lock takes the group's lock for a handle that is open.
func (m *Member) lock() error {
	m.g.mu.Lock()
	if m.closed {
		m.g.mu.Unlock()
		return engine.ErrClosed
	}
	return nil
}

// lockWriter takes the group's lock for a handle that is open and writes
// as a member; op names what a read-only handle is refused.
func (m *Member) lockWriter(op string) error {
	if err := m.lock(); err != nil {
		return err
	}
	if m.member == "" {
		m.g.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrReadOnly, op)
	}
	return nil
}

// Head returns this member's chain head.
func (m *Member) Head(ctx context.Context) (engine.AuditHead, error) {
	if err := m.lock(); err != nil {
		return engine.AuditHead{}, err
	}
	defer m.g.mu.Unlock()
	if c := m.g.chains[m.member]; c != nil {
		return c.head, nil
	}
	return engine.AuditHead{}, nil
}

// ScanSources calls fn for each of the group's source windows, in id
// order, with the group unlocked.
func (m *Member) ScanSources(ctx context.Context, fn func(engine.SourceState) error) error {
	snap, err := m.Load(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(snap.Sources, func(a, b engine.SourceState) int { return strings.Compare(a.ID(), b.ID()) })
	for _, s := range snap.Sources {
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// ScanEntities is ScanSources of the group's entities, in name order.
func (m *Member) ScanEntities(ctx context.Context, fn func(engine.EntityState) error) error {
	snap, err := m.Load(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(snap.Entities, func(a, b engine.EntityState) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range snap.Entities {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// CountRows returns the number of the group's sources and entities.
func (m *Member) CountRows(context.Context) (sources, entities int, err error) {
	if err := m.lock(); err != nil {
		return 0, 0, err
	}
	defer m.g.mu.Unlock()
	return len(m.g.sources), len(m.g.entities), nil
}

// Load returns the group's sources and entities and this member's head.
func (m *Member) Load(ctx context.Context) (*engine.Snapshot, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	snap := &engine.Snapshot{}
	for _, s := range m.g.sources {
		snap.Sources = append(snap.Sources, copySource(s))
	}
	for _, e := range m.g.entities {
		snap.Entities = append(snap.Entities, copyEntity(e))
	}
	if c := m.g.chains[m.member]; c != nil {
		snap.AuditHead = c.head
	}
	return snap, nil
}

// maxHeldTries bounds how often Update decides a batch whose duplicates
// name entries no longer open.
const maxHeldTries = 4

// Update reads r's rows, decides and writes, all under the group's lock.
func (m *Member) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: update: %w", err)
	}
	if err := m.lockWriter("update"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	g := m.g
	rows := &engine.Rows{}
	for _, k := range r.Keys {
		if e, ok := g.keys[k]; ok {
			rows.Keys = append(rows.Keys, e)
		}
	}
	for _, id := range r.Sources {
		if s, ok := g.sources[id]; ok {
			rows.Sources = append(rows.Sources, copySource(s))
		}
	}
	for _, name := range r.Entities {
		if e, ok := g.entities[name]; ok {
			rows.Entities = append(rows.Entities, copyEntity(e))
		}
	}
	b, err := decide(rows)
	for try := 1; err == nil && !g.heldOpen(b.HeldOpen); try++ { // never under this lock: kept for the suite's sake
		if try == maxHeldTries {
			return fmt.Errorf("%w: entries the batch's duplicates named kept closing", engine.ErrContention)
		}
		b, err = decide(rows)
	}
	if err != nil {
		return err
	}
	for _, k := range b.Keys {
		if e, ok := g.keys[k.Key]; ok && e.Time >= r.KeyCutoff {
			return fmt.Errorf("memory: update: key %s is stored already: the batch was decided on a key it did not read", k.Key)
		}
	}
	return m.write(b)
}

// Commit writes b without reads.
func (m *Member) Commit(ctx context.Context, b *engine.Batch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: commit: %w", err)
	}
	if err := m.lockWriter("commit"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	return m.write(b)
}

// write applies b, checking everything first. Called with g.mu held.
func (m *Member) write(b *engine.Batch) error {
	g := m.g
	c := g.chains[m.member]
	if c == nil {
		c = &chain{}
	}
	head, err := engine.NextHead(c.head, b.Audit)
	if err != nil {
		return err
	}
	for _, id := range b.Resolved {
		if _, ok := g.quarantine[id]; !ok {
			return fmt.Errorf("%w: quarantine entry %d is no longer open", engine.ErrNotFound, id)
		}
	}
	if err := engine.CheckOutbox(b); err != nil {
		return err
	}
	for _, r := range b.OutboxResolved {
		if err := g.outboxes[r.Member].checkResolved(r.Member, []engine.OutboxResolve{r}); err != nil {
			return err
		}
	}
	for _, h := range b.OutboxHeld {
		if err := g.outboxes[h.Member].checkHeld(h); err != nil {
			return err
		}
	}
	for _, r := range b.Audit {
		c.log.append(keepRecord(r))
	}
	if len(b.Audit) > 0 { // a batch without records starts no chain
		c.head, g.chains[m.member] = head, c
	}
	for _, k := range b.Keys {
		g.keys[k.Key] = k
	}
	g.prune()
	for _, s := range b.Sources {
		g.sources[s.ID()] = copySource(s)
	}
	for _, e := range b.Entities {
		g.entities[e.Name] = copyEntity(e)
	}
	g.heldMu.Lock()
	for _, q := range b.Quarantine {
		q.Payload = slices.Clone(q.Payload)
		g.quarantine[q.ID] = q
		g.held.add(q)
	}
	for _, id := range b.Resolved {
		g.held.remove(g.quarantine[id])
		delete(g.quarantine, id)
	}
	g.heldMu.Unlock()
	m.writeOutbox(b)
	return nil
}

// prune drops expired keys and the oldest over maxEntries. Called with g.mu
// held.
func (g *Group) prune() {
	cutoff := time.Now().Add(-g.ttl).UnixNano()
	maps.DeleteFunc(g.keys, func(_ engine.Hash, e engine.KeyEntry) bool { return e.Time < cutoff })
	if over := len(g.keys) - g.maxEntries; over > 0 {
		all := slices.SortedFunc(maps.Values(g.keys), func(a, b engine.KeyEntry) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
		for _, e := range all[:over] {
			delete(g.keys, e.Key)
		}
	}
}

// Chains returns every member's chain head, by member id.
func (m *Member) Chains(ctx context.Context) ([]engine.Chain, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	var out []engine.Chain
	for _, id := range slices.Sorted(maps.Keys(m.g.chains)) {
		out = append(out, engine.Chain{Member: id, Head: m.g.chains[id].head})
	}
	return out, nil
}

// ScanChain calls fn with each record of member's chain from position from,
// or from the first after the chain's base when from is below it.
func (m *Member) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	if err := m.lock(); err != nil {
		return err
	}
	c := m.g.chains[member]
	var view auditLog
	var base engine.AuditHead
	if c != nil {
		view, base = c.log.view(), c.base
	}
	m.g.mu.Unlock()
	return view.scan(max(from, base.Position+1, 1), func(r *engine.AuditRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(copyRecord(*r))
	})
}

// ScanAudit scans this member's chain.
func (m *Member) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	if m.member == "" {
		return fmt.Errorf("memory: a read-only handle has no chain of its own: scan a member's")
	}
	return m.ScanChain(ctx, m.member, from, fn)
}

// CountQuarantine counts the group's open entries.
func (m *Member) CountQuarantine(context.Context) (int, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.g.mu.Unlock()
	return len(m.g.quarantine), nil
}

// ScanQuarantine calls fn with each open entry of the group, in id order.
func (m *Member) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	if err := m.lock(); err != nil {
		return err
	}
	entries := slices.SortedFunc(maps.Values(m.g.quarantine), func(a, b engine.QuarantineEntry) int { return cmp.Compare(a.ID, b.ID) })
	m.g.mu.Unlock()
	for _, q := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.Payload = slices.Clone(q.Payload)
		if err := fn(q); err != nil {
			return err
		}
	}
	return nil
}

// Quarantined returns the group's open entry id, or engine.ErrNotFound.
func (m *Member) Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error) {
	if err := m.lock(); err != nil {
		return engine.QuarantineEntry{}, err
	}
	defer m.g.mu.Unlock()
	q, ok := m.g.quarantine[id]
	if !ok {
		return engine.QuarantineEntry{}, fmt.Errorf("%w: quarantine entry %d", engine.ErrNotFound, id)
	}
	q.Payload = slices.Clone(q.Payload)
	return q, nil
}

// Close releases the member id and the handle's outbox and chain claims;
// the group's data stays.
func (m *Member) Close() error {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if m.closed {
		return engine.ErrClosed
	}
	m.closed = true
	if m.member != "" {
		delete(m.g.members, m.member)
		delete(m.g.shares, m.member)
	}
	m.releaseClaims()
	return nil
}
