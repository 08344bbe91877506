package sink

import (
	"context"
	"fmt"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// ChainStore is what the sinks read and write in a shared store: each
// member's chain, and each sink's cursor on each chain (engine.ChainScanner
// and engine.ChainKeeper have them). Safe for concurrent use; a sink
// writes only its own cursors.
type ChainStore interface {
	// ScanChain calls fn for each record of member's chain with position
	// >= from, in order.
	ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error
	// ChainCursor returns sink's cursor on member's chain; 0 when none.
	ChainCursor(ctx context.Context, member, sink string) (uint64, error)
	// SetChainCursorAt records at.Position as it, durably when it returns
	// nil, unless the cursor is already past it, and only if the chain
	// holds the record at there: engine.ErrCursorRecord otherwise.
	SetChainCursorAt(ctx context.Context, member, sink string, at engine.AuditHead) error
}

// NewChains returns a set of sinks over the members' chains of a shared
// store. It delivers no chain until SetChains gives it some: the caller
// claims the chains this process streams (engine.ChainKeeper.ClaimChains)
// and hands them over. Names must be unique and not empty.
func NewChains(store ChainStore, opts Options) (*Set, error) {
	return newSet(groupLogs{store}, opts)
}

// SetChains makes chains the members' chains the sinks deliver, each with
// its head as the store keeps it, and wakes every sink. A chain given for
// the first time, or again after it was taken away, is delivered from its
// cursor in the store (another process may have moved it meanwhile). A
// chain taken away is no longer delivered once SetChains returns: the
// batch of it in hand is cancelled, and SetChains waits for it to end, so
// that the chain's claim can be given up without a late batch of it
// reaching a receiver after the newer records the next process sends.
func (s *Set) SetChains(chains []engine.Chain) {
	ids := make([]string, 0, len(chains))
	for _, c := range chains {
		ids = append(ids, c.Member)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s.mu.Lock()
	s.chains = ids
	for _, c := range chains {
		if c.Head.Position > s.heads[c.Member] {
			s.heads[c.Member] = c.Head.Position
		}
	}
	for _, r := range s.sinks {
		r.mu.Lock()
		for chain := range r.cursors {
			if !slices.Contains(ids, chain) {
				delete(r.cursors, chain)
			}
		}
		r.mu.Unlock()
	}
	var landing []*flight
	for f := range s.flights {
		if !slices.Contains(ids, f.chain) {
			f.cancel()
			landing = append(landing, f)
		}
	}
	s.mu.Unlock()
	for _, f := range landing {
		<-f.done
	}
	s.wakeAll()
}

// Floor returns the lowest cursor on member's chain over every sink, as
// the store keeps it: every sink delivered each record of the chain at or
// below it. Audit retention trims a chain no further.
func (s *Set) Floor(ctx context.Context, member string) (uint64, error) {
	cursors, err := s.Cursors(ctx, member)
	if err != nil {
		return 0, err
	}
	floor := uint64(0)
	for i, r := range s.sinks {
		if c := cursors[r.Name]; i == 0 || c < floor {
			floor = c
		}
	}
	return floor, nil
}

// Cursors returns each sink's cursor on member's chain, by name, as the
// store keeps it: the sink delivered each record of the chain at or below
// it.
func (s *Set) Cursors(ctx context.Context, member string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(s.sinks))
	for _, r := range s.sinks {
		c, err := s.logs.cursor(ctx, member, r.Name)
		if err != nil {
			return nil, fmt.Errorf("read the cursor of sink %s: %w", r.Name, err)
		}
		out[r.Name] = c
	}
	return out, nil
}

// chainLogs are the chains a Set delivers and its cursors on them.
type chainLogs interface {
	scan(ctx context.Context, chain string, from uint64, fn func(engine.AuditRecord) error) error
	cursor(ctx context.Context, chain, sink string) (uint64, error)
	// setCursor saves the cursor of a sink that delivered the record at.
	setCursor(ctx context.Context, chain, sink string, at engine.AuditHead) error
}

// ownerLogs is a single-owner store: one chain, "".
type ownerLogs struct{ s Store }

func (l ownerLogs) scan(ctx context.Context, _ string, from uint64, fn func(engine.AuditRecord) error) error {
	return l.s.ScanAudit(ctx, from, fn)
}

func (l ownerLogs) cursor(ctx context.Context, _, sink string) (uint64, error) {
	return l.s.Cursor(ctx, sink)
}

// setCursor needs no check of the record: a single-owner store's log
// never goes back under its owner.
func (l ownerLogs) setCursor(ctx context.Context, _, sink string, at engine.AuditHead) error {
	return l.s.SetCursor(ctx, sink, at.Position)
}

// groupLogs is a shared store: a chain per member.
type groupLogs struct{ s ChainStore }

func (l groupLogs) scan(ctx context.Context, chain string, from uint64, fn func(engine.AuditRecord) error) error {
	return l.s.ScanChain(ctx, chain, from, fn)
}

func (l groupLogs) cursor(ctx context.Context, chain, sink string) (uint64, error) {
	return l.s.ChainCursor(ctx, chain, sink)
}

func (l groupLogs) setCursor(ctx context.Context, chain, sink string, at engine.AuditHead) error {
	return l.s.SetChainCursorAt(ctx, chain, sink, at)
}
