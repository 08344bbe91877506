package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// What audit retention and the audit sinks need of each member's chain
// (engine.ChainKeeper): its base, its trim, the sinks' cursors on it, and
// the claims that hand a departed member's chain to one live handle.

var _ engine.ChainKeeper = (*Member)(nil)

// chainSink names one audit sink's cursor on one member's chain.
type chainSink struct {
	member, sink string
}

// ChainBase returns the last dropped record of member's chain; zero when
// none was dropped or the member has no chain.
func (m *Member) ChainBase(ctx context.Context, member string) (engine.AuditHead, error) {
	if err := m.lock(); err != nil {
		return engine.AuditHead{}, err
	}
	defer m.g.mu.Unlock()
	if c := m.g.chains[member]; c != nil {
		return c.base, nil
	}
	return engine.AuditHead{}, nil
}

// TrimChain drops the records of member's chain below below and makes base
// its base; see engine.ChainKeeper. Any member's handle may trim any
// member's chain; a read-only handle fails with ErrReadOnly.
func (m *Member) TrimChain(ctx context.Context, member string, below uint64, base engine.AuditHead) error {
	if err := m.lockWriter("trim chain"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	g := m.g
	c := g.chains[member]
	if c == nil {
		c = &chain{} // no chain: every base is refused below
	}
	if below != base.Position+1 || base.Position <= c.base.Position || base.Position > c.head.Position {
		return fmt.Errorf("%w: member %q: base at position %d for a trim below %d, with the stored chain at %d..%d",
			engine.ErrTrimBase, member, base.Position, below, c.base.Position+1, c.head.Position)
	}
	if c, ok := g.claims[claimKey{chainClaim, member}]; ok && c.by != m && time.Now().Before(c.expires) {
		return fmt.Errorf("%w: member %q", engine.ErrChainClaimed, member)
	}
	qbase := g.numbers[member] << 40 // the member has one: it wrote records
	for id := range g.quarantine {
		if id > qbase && id < qbase+below {
			return fmt.Errorf("%w: member %q: entry %d", engine.ErrTrimQuarantine, member, id)
		}
	}
	if r := c.log.at(base.Position); r == nil || r.Hash != base.Hash {
		return fmt.Errorf("%w: member %q: at position %d", engine.ErrTrimBase, member, base.Position)
	}
	c.log.drop(below)
	c.base = base
	return nil
}

// ChainCursor returns sink's cursor on member's chain; 0 when none.
func (m *Member) ChainCursor(ctx context.Context, member, sink string) (uint64, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.g.mu.Unlock()
	return m.g.cursors[chainSink{member, sink}], nil
}

// ChainCursors returns every cursor stored on member's chain, by sink.
func (m *Member) ChainCursors(ctx context.Context, member string) (map[string]uint64, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	out := map[string]uint64{}
	for k, pos := range m.g.cursors {
		if k.member == member {
			out[k.sink] = pos
		}
	}
	return out, nil
}

// ForgetSink drops sink's cursor on every member's chain and returns the
// members whose chain had one, sorted.
func (m *Member) ForgetSink(ctx context.Context, sink string) ([]string, error) {
	if err := m.lockWriter("forget a sink"); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	var members []string
	for k := range m.g.cursors {
		if k.sink == sink {
			members = append(members, k.member)
			delete(m.g.cursors, k)
		}
	}
	slices.Sort(members)
	return members, nil
}

// SetChainCursor records pos as sink's cursor on member's chain, unless
// the cursor is already past it. A member the group never had fails it
// with engine.ErrNotFound, a read-only handle with ErrReadOnly.
func (m *Member) SetChainCursor(ctx context.Context, member, sink string, pos uint64) error {
	if err := m.lockWriter("set chain cursor"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	if _, ok := m.g.numbers[member]; !ok {
		return fmt.Errorf("%w: memory store: set the cursor of sink %q: the group has no member %q", engine.ErrNotFound, sink, member)
	}
	k := chainSink{member, sink}
	m.g.cursors[k] = max(m.g.cursors[k], pos)
	return nil
}

// SetChainCursorAt records at.Position as sink's cursor on member's chain,
// as SetChainCursor does, only if the chain holds the record at (its hash)
// there; engine.ErrCursorRecord otherwise.
func (m *Member) SetChainCursorAt(ctx context.Context, member, sink string, at engine.AuditHead) error {
	if err := m.lockWriter("set chain cursor"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	if _, ok := m.g.numbers[member]; !ok {
		return fmt.Errorf("%w: memory store: set the cursor of sink %q: the group has no member %q", engine.ErrNotFound, sink, member)
	}
	var r *engine.AuditRecord
	if c := m.g.chains[member]; c != nil {
		r = c.log.at(at.Position)
	}
	if r == nil || r.Hash != at.Hash {
		return fmt.Errorf("%w: memory store: sink %q, position %d of member %q's chain", engine.ErrCursorRecord, sink, at.Position, member)
	}
	k := chainSink{member, sink}
	m.g.cursors[k] = max(m.g.cursors[k], at.Position)
	return nil
}

// QuarantineBases returns every member's quarantine base by member id.
func (m *Member) QuarantineBases(ctx context.Context) (map[string]uint64, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	out := make(map[string]uint64, len(m.g.numbers))
	for member, n := range m.g.numbers {
		out[member] = n << 40
	}
	return out, nil
}

// ClaimChains takes or renews this handle's chain claims: its own
// member's, and that of every member with a chain that no open handle
// holds; see engine.ChainKeeper. A read-only handle fails with ErrReadOnly.
func (m *Member) ClaimChains(ctx context.Context) ([]string, error) {
	if err := m.lockWriter("claim chains"); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	always := func(string) bool { return true } // every member in g.chains has a chain
	return m.claimEach(chainClaim, slices.Collect(maps.Keys(m.g.chains)), always), nil
}

// ReleaseChain gives up this handle's claim of member's chain.
func (m *Member) ReleaseChain(ctx context.Context, member string) error {
	return m.release("release chain", claimKey{chainClaim, member})
}
