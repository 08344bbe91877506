package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/replayguard/replayguard/engine"
)

// ErrBroken is matched by every BrokenError.
var ErrBroken = errors.New("audit chain broken")

// BrokenError says where the chain first fails and why.
type BrokenError struct {
	Position uint64 // the first record that does not verify (its expected position for a hole)
	Member   string // whose chain, on a shared store
	Reason   string
}

func (e *BrokenError) Error() string {
	if e.Member != "" {
		return fmt.Sprintf("audit chain of member %s broken at position %d: %s", e.Member, e.Position, e.Reason)
	}
	return fmt.Sprintf("audit chain broken at position %d: %s", e.Position, e.Reason)
}

// Is makes errors.Is(err, ErrBroken) true.
func (e *BrokenError) Is(target error) bool { return target == ErrBroken }

// Verifier checks records one at a time, in order.
type Verifier struct {
	start  uint64 // the first position checked
	next   uint64
	prev   engine.Hash
	member string
	// archived is the last record of an archive that overlaps the stored
	// log (sealed, the store not yet trimmed): the store's record there
	// must be the same.
	archived engine.AuditHead
	// stored is set for the records a store holds, from its base: a
	// position they skip is named missing from the store (Missing).
	stored bool
}

// NewVerifier starts a chain at position 1: a single-owner store's, whose
// records name no member.
func NewVerifier() *Verifier { return &Verifier{start: 1, next: 1} }

// NewChainVerifier starts member's chain of a shared store at position 1:
// each of its records must name member.
func NewChainVerifier(member string) *Verifier { return &Verifier{start: 1, next: 1, member: member} }

// NewVerifierFrom starts a chain after base, a store's audit base (see
// engine.AuditTrimmer): the first record must be at base.Position+1 and
// link to base.Hash. member is empty for a single-owner store.
func NewVerifierFrom(base engine.AuditHead, member string) *Verifier {
	return &Verifier{start: base.Position + 1, next: base.Position + 1, prev: base.Hash, member: member}
}

// NewStoreVerifier is NewVerifierFrom for the records a store holds after
// its base: positions they skip are named missing from the store, by the
// base, as the after-action report names them (Missing), rather than as a
// position found where another should be.
func NewStoreVerifier(base engine.AuditHead, member string) *Verifier {
	v := NewVerifierFrom(base, member)
	v.stored = true
	return v
}

// Check verifies the next record.
func (v *Verifier) Check(r engine.AuditRecord) error {
	switch {
	case r.Member != v.member:
		return &BrokenError{Position: r.Position, Member: v.member,
			Reason: fmt.Sprintf("the record names member %q in the chain of %q", r.Member, v.member)}
	case r.Position > v.next && v.stored:
		return &BrokenError{Position: v.next, Member: v.member, Reason: Missing(v.next, r.Position-1, v.start-1, true, "", false)}
	case r.Position != v.next:
		return &BrokenError{Position: v.next, Member: v.member, Reason: fmt.Sprintf("found position %d where %d should be (a record removed or reordered)", r.Position, v.next)}
	case r.Prev != v.prev:
		return &BrokenError{Position: r.Position, Member: v.member, Reason: "prev does not match the previous record's hash"}
	}
	h, err := engine.ChainHash(r)
	if err != nil {
		return &BrokenError{Position: r.Position, Member: v.member, Reason: err.Error()}
	}
	if h != r.Hash {
		return &BrokenError{Position: r.Position, Member: v.member, Reason: "hash does not match the record's content (altered)"}
	}
	if r.Position == v.archived.Position && h != v.archived.Hash {
		return &BrokenError{Position: r.Position, Member: v.member, Reason: "the store's record differs from the archived one at this position"}
	}
	v.next++
	v.prev = h
	return nil
}

// Count is the number of records verified so far.
func (v *Verifier) Count() uint64 { return v.next - v.start }

// Head is the last verified link.
func (v *Verifier) Head() engine.AuditHead {
	return engine.AuditHead{Position: v.next - 1, Hash: v.prev}
}

// Verify walks the store's whole log: from position 1, or on a store that
// audit retention trimmed (an engine.AuditTrimmer) from its base, to which
// the first stored record must link. When head is not zero (the chain head
// the store keeps apart from the records) the last record must match it, so
// a removed tail is caught too. It returns the number of records checked.
func Verify(ctx context.Context, s engine.Store, head engine.AuditHead) (uint64, error) {
	var base engine.AuditHead
	if t := s.Capabilities().Trim; t != nil {
		var err error
		if base, err = t.AuditBase(ctx); err != nil {
			return 0, err
		}
	}
	return VerifyFrom(ctx, s, base, head)
}

// VerifyFrom is Verify from base (zero: position 1).
func VerifyFrom(ctx context.Context, s engine.AuditScanner, base, head engine.AuditHead) (uint64, error) {
	v := NewStoreVerifier(base, "")
	if err := s.ScanAudit(ctx, base.Position+1, v.Check); err != nil {
		return v.Count(), err
	}
	return v.Count(), v.CheckHead(head)
}

// CheckHead reports a log that ends before the chain head the store keeps
// (zero: none kept), or whose last record is not the one the head names.
func (v *Verifier) CheckHead(head engine.AuditHead) error {
	switch h := v.Head(); {
	case head.Position == 0 || h == head:
		return nil
	case h.Position == head.Position:
		return &BrokenError{Position: h.Position, Member: v.member,
			Reason: fmt.Sprintf("the last record's hash does not match the chain head at position %d", h.Position)}
	default:
		return &BrokenError{Position: v.next, Member: v.member,
			Reason: fmt.Sprintf("log ends at position %d but the chain head is at %d", v.next-1, head.Position)}
	}
}

// ChainResult is one member's verified chain.
type ChainResult struct {
	Member  string
	Base    engine.AuditHead // where the stored chain begins: zero unless retention trimmed it
	Records uint64           // records verified in the store
	Head    engine.AuditHead // the chain head the store keeps
}

// ChainBases says where each member's chain of a shared store begins once
// audit retention trimmed it (engine.ChainKeeper does).
type ChainBases interface {
	// ChainBase returns the last dropped record of member's chain; zero
	// when nothing was dropped.
	ChainBase(ctx context.Context, member string) (engine.AuditHead, error)
}

// VerifyChains walks every member's chain of a shared store, each from its
// base (bases; nil: every chain from position 1), to which the first
// stored record must link, against its stored head. Members may run
// meanwhile: a chain is verified up to the head read before its records,
// and again when retention trimmed it between the reads. It returns what it
// verified, chain by chain, up to the first break, whose chain is the last.
// A store that can find records outside every chain (a StrayFinder) is
// asked first: such records are a break named by their member.
func VerifyChains(ctx context.Context, s engine.ChainScanner, bases ChainBases) ([]ChainResult, error) {
	chains, err := s.Chains(ctx)
	if err != nil {
		return nil, err
	}
	if err := CheckStray(ctx, s); err != nil {
		return nil, err
	}
	var out []ChainResult
	for _, c := range chains {
		r, head, err := againWhileTrimmed(ctx, s, bases, c.Member, c.Head, func(base, head engine.AuditHead) (ChainResult, error) {
			v := NewStoreVerifier(base, c.Member)
			err := chainScanner{s, c.Member, head.Position}.ScanAudit(ctx, base.Position+1, v.Check)
			if err == nil {
				err = v.CheckHead(head)
			}
			return ChainResult{Member: c.Member, Base: base, Records: v.Count(), Head: head}, err
		})
		r.Member, r.Head = c.Member, head // also when the base could not be read
		out = append(out, r)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// StrayFinder is a shared store that can find audit records outside every
// chain its Chains lists. A chain is verified up to the head the store
// keeps for it, so records past a head that was reset or moved back, or of
// a member whose row was removed, would otherwise be read by nothing.
type StrayFinder interface {
	// StrayAudit returns the first such chain's member, the position of its
	// last record and the head the store keeps for it (zero: none); last is
	// zero when every record is in a chain.
	StrayAudit(ctx context.Context) (member string, last, head uint64, err error)
}

// CheckStray reports the records of s outside every chain, when s can
// find them (a StrayFinder): a *BrokenError naming the first such chain's
// member.
func CheckStray(ctx context.Context, s engine.ChainScanner) error {
	f, ok := s.(StrayFinder)
	if !ok {
		return nil
	}
	member, last, head, err := f.StrayAudit(ctx)
	if err != nil || last == 0 {
		return err
	}
	return &BrokenError{Position: head + 1, Member: member,
		Reason: fmt.Sprintf("the store holds records of this chain up to position %d, past the chain head it keeps (%d): the head was reset or moved back, or the member removed", last, head)}
}

// chainBase is member's base; zero without bases.
func chainBase(ctx context.Context, bases ChainBases, member string) (engine.AuditHead, error) {
	if bases == nil {
		return engine.AuditHead{}, nil
	}
	base, err := bases.ChainBase(ctx, member)
	if err != nil {
		return base, fmt.Errorf("read the base of member %s's chain: %w", member, err)
	}
	return base, nil
}

// ExportChains writes every member's chain of a shared store as JSON
// Lines, chain by chain, each from position from.
func ExportChains(ctx context.Context, s engine.ChainScanner, from uint64, w io.Writer) (uint64, error) {
	chains, err := s.Chains(ctx)
	if err != nil {
		return 0, err
	}
	total := uint64(0)
	for _, c := range chains {
		n, err := Export(ctx, chainScanner{s, c.Member, c.Head.Position}, from, w)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// chainScanner is one member's chain as an AuditScanner.
type chainScanner struct {
	s      engine.ChainScanner
	member string
	upto   uint64 // the head read before the scan: records a member commits after it are not scanned
}

func (c chainScanner) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	err := c.s.ScanChain(ctx, c.member, from, func(r engine.AuditRecord) error {
		if c.upto != 0 && r.Position > c.upto {
			return errStop
		}
		return fn(r)
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// againWhileTrimmed verifies member's chain with check, from its base up
// to its head, and once more (twice at most) when check failed and the
// chain's base moved meanwhile: retention of a running group trimmed it
// between the reads of the base and of the records, which is no break. A
// break that stays where it was is reported. head is the chain's head as
// read with the chains; with bases it is read again after each base.
func againWhileTrimmed[T any](ctx context.Context, s engine.ChainScanner, bases ChainBases, member string, head engine.AuditHead,
	check func(base, head engine.AuditHead) (T, error)) (T, engine.AuditHead, error) {
	for again := 0; ; again++ {
		base, err := chainBase(ctx, bases, member)
		if err != nil {
			var zero T
			return zero, head, err
		}
		if bases != nil { // read after the base: a trim between them leaves the head above it
			if head, err = chainHead(ctx, s, member); err != nil {
				var zero T
				return zero, head, err
			}
		}
		got, err := check(base, head)
		if err == nil || bases == nil || again == 2 {
			return got, head, err
		}
		if now, berr := chainBase(ctx, bases, member); berr != nil || now == base {
			return got, head, err
		}
	}
}

// chainHead reads member's chain head.
func chainHead(ctx context.Context, s engine.ChainScanner, member string) (engine.AuditHead, error) {
	chains, err := s.Chains(ctx)
	if err != nil {
		return engine.AuditHead{}, err
	}
	for _, c := range chains {
		if c.Member == member {
			return c.Head, nil
		}
	}
	return engine.AuditHead{}, fmt.Errorf("member %s has no chain any more", member)
}

// Export writes the records with position >= from as JSON Lines.
func Export(ctx context.Context, s engine.AuditScanner, from uint64, w io.Writer) (uint64, error) {
	bw := bufio.NewWriter(w)
	var line []byte
	n := uint64(0)
	err := s.ScanAudit(ctx, from, func(r engine.AuditRecord) error {
		n++
		var err error
		if line, err = engine.AppendRecordJSON(line[:0], &r); err != nil { // what json.Encoder writes
			return err
		}
		_, err = bw.Write(append(line, '\n'))
		return err
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}
