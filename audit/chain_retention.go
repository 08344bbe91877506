package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// ChainStore is a shared store whose members' chains retention trims: it
// reads the chains (engine.ChainScanner), trims them and names the
// members' quarantine bases (engine.ChainKeeper), and lists the group's
// open quarantine entries.
type ChainStore interface {
	engine.ChainScanner
	engine.ChainKeeper
	engine.QuarantineScanner
}

// NewChainRetention returns retention for opts.Member's chain of the
// shared store s: it archives the chain under ChainDir(opts.Archive,
// opts.Member), trims it with TrimChain, and is held back only by that
// member's open quarantine entries. opts.Head bounds it as for
// NewRetention, with the head of that chain.
func NewChainRetention(s ChainStore, opts RetentionOptions) (*Retention, error) {
	if opts.Member == "" {
		return nil, fmt.Errorf("%w: no member: a shared store's retention trims one member's chain", ErrRetention)
	}
	if err := CheckChainDir(opts.Member); err != nil {
		return nil, fmt.Errorf("%w: %v (%s)", ErrRetention, err, ChainDir(opts.Archive, opts.Member))
	}
	return newRetention(memberLog{s: s, member: opts.Member}, opts)
}

// CheckChainDir refuses a member id that cannot name its directory of an
// archive (ChainDir): one holding a path separator.
func CheckChainDir(member string) error {
	if strings.ContainsAny(member, `/\`) {
		return fmt.Errorf("member id %q holds a path separator: the archive keeps each member's segments in a directory named after its id", member)
	}
	return nil
}

// memberLog is one member's chain of a shared store as a trimLog.
type memberLog struct {
	s      ChainStore
	member string
}

func (l memberLog) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	return l.s.ScanChain(ctx, l.member, from, fn)
}

func (l memberLog) AuditBase(ctx context.Context) (engine.AuditHead, error) {
	return l.s.ChainBase(ctx, l.member)
}

func (l memberLog) TrimAudit(ctx context.Context, below uint64, base engine.AuditHead) error {
	return l.s.TrimChain(ctx, l.member, below, base)
}

// quarantineFloor is the position in the member's chain of its oldest
// open quarantine entry's record: the entries of a member have the ids
// from its quarantine base up to the next member's base, each its base
// plus its record's position. math.MaxUint64 when the member holds none.
func (l memberLog) quarantineFloor(ctx context.Context) (uint64, error) {
	bases, err := l.s.QuarantineBases(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the members' quarantine bases: %w", err)
	}
	base, ok := bases[l.member]
	if !ok {
		return math.MaxUint64, nil // no number: it never held a message
	}
	next := uint64(math.MaxUint64)
	for _, b := range bases {
		if b > base && b < next {
			next = b
		}
	}
	floor := uint64(math.MaxUint64)
	err = l.s.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
		switch {
		case q.ID <= base: // another member's (a position is at least 1)
			return nil
		case q.ID >= next:
			return errStop // in ID order: the member has none left
		}
		floor = q.ID - base
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return floor, err
}
