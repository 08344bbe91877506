package report

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/replayguard/replayguard/engine"
)

// errStop ends a scan whose reader stopped early.
var errStop = errors.New("report: stop")

// errPastHead ends a chain's scan at the head read with the chains.
var errPastHead = errors.New("report: past the chain head")

// Scanned turns a scan (a function that calls fn for each record, in
// order, until fn fails) into the records Build reads.
func Scanned(scan func(fn func(engine.AuditRecord) error) error) iter.Seq2[engine.AuditRecord, error] {
	return func(yield func(engine.AuditRecord, error) bool) {
		err := scan(func(r engine.AuditRecord) error {
			if !yield(r, nil) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield(engine.AuditRecord{}, err)
		}
	}
}

// Records is a single-owner store's log from its first record: the
// records archive holds (nil: none), then the store's.
func Records(ctx context.Context, s engine.AuditScanner, archive Archive) iter.Seq2[engine.AuditRecord, error] {
	return Scanned(WithArchive(ctx, "", archive, func(fn func(engine.AuditRecord) error) error { return s.ScanAudit(ctx, 1, fn) }))
}

// Archive reads member's records that audit retention moved out of the
// store ("" on a single-owner store), in position order, each verified
// before fn sees it: audit.ScanArchiveAcrossHoles over one directory.
type Archive func(ctx context.Context, member string, fn func(engine.AuditRecord) error) error

// WithArchive returns the scan of member's whole chain: the records
// archive holds (nil: none), then those of stored (a scan of the store's
// chain) that follow the last of them. A record both hold (a trim that
// stopped after sealing its segment) is read from the archive; the
// store's copy of the archive's last record must have the same hash.
// Records the store no longer holds when it is read, though they follow
// the last record read (retention moved them meanwhile: the store's holder
// runs it), are read from the archive again; once the archive lacks them
// too (the store lost them: a break the verification names), it is not
// read again for the holes that follow.
func WithArchive(ctx context.Context, member string, archive Archive, stored func(fn func(engine.AuditRecord) error) error) func(fn func(engine.AuditRecord) error) error {
	if archive == nil {
		return stored
	}
	return func(fn func(engine.AuditRecord) error) error {
		var last, archived engine.AuditHead // the last record read, and from the archive
		holed := false                      // the archive lacked a hole's records: the store's own, read again for none
		fromArchive := func(below uint64) error {
			return archive(ctx, member, func(r engine.AuditRecord) error {
				if r.Position <= last.Position || r.Position >= below {
					return nil
				}
				last = engine.AuditHead{Position: r.Position, Hash: r.Hash}
				archived = last
				return fn(r)
			})
		}
		if err := fromArchive(math.MaxUint64); err != nil {
			return err
		}
		return stored(func(r engine.AuditRecord) error {
			if r.Position > last.Position+1 && !holed {
				if err := fromArchive(r.Position); err != nil { // moved there meanwhile
					return err
				}
				holed = r.Position > last.Position+1
			}
			switch {
			case r.Position > archived.Position:
				last = engine.AuditHead{Position: r.Position, Hash: r.Hash}
				return fn(r)
			case r.Position == archived.Position && r.Hash != archived.Hash:
				return fmt.Errorf("%s: the store's record at position %d differs from the archive's", chainName(member), r.Position)
			}
			return nil
		})
	}
}

// chainName names member's chain in a message.
func chainName(member string) string {
	if member == "" {
		return "the audit chain"
	}
	return fmt.Sprintf("member %q's chain", member)
}

// Chains is every member's chain of a shared store, each from its first
// record (from archive, nil: none, then from the store), merged by time
// (ties by member, then position), with the chain heads the store keeps
// for Options.Heads.
func Chains(ctx context.Context, cs engine.ChainScanner, archive Archive) (iter.Seq2[engine.AuditRecord, error], map[string]engine.AuditHead, error) {
	chains, err := cs.Chains(ctx)
	if err != nil {
		return nil, nil, err
	}
	heads := make(map[string]engine.AuditHead, len(chains))
	for _, c := range chains {
		heads[c.Member] = c.Head
	}
	return func(yield func(engine.AuditRecord, error) bool) {
		var curs []*cursor
		for _, c := range chains {
			upto := c.Head.Position
			next, stop := iter.Pull2(Scanned(WithArchive(ctx, c.Member, archive, func(fn func(engine.AuditRecord) error) error {
				// Up to the head read with the chains: a member that runs
				// commits after it, and a record past the head read is no
				// removed tail (audit.VerifyChains stops there too).
				err := cs.ScanChain(ctx, c.Member, 1, func(r engine.AuditRecord) error {
					if upto != 0 && r.Position > upto {
						return errPastHead
					}
					return fn(r)
				})
				if errors.Is(err, errPastHead) {
					return nil
				}
				return err
			})))
			defer stop()
			curs = append(curs, &cursor{next: next, member: c.Member})
		}
		for i := 0; i < len(curs); {
			if err := curs[i].advance(); err != nil {
				yield(engine.AuditRecord{}, err)
				return
			}
			if curs[i].done {
				curs = append(curs[:i], curs[i+1:]...)
				continue
			}
			i++
		}
		for len(curs) > 0 {
			min := 0
			for i, c := range curs[1:] {
				if c.before(curs[min]) {
					min = i + 1
				}
			}
			if !yield(curs[min].rec, nil) {
				return
			}
			if err := curs[min].advance(); err != nil {
				yield(engine.AuditRecord{}, err)
				return
			}
			if curs[min].done {
				curs = append(curs[:min], curs[min+1:]...)
			}
		}
	}, heads, nil
}

// cursor is one chain's next record in a merge.
type cursor struct {
	next   func() (engine.AuditRecord, error, bool)
	member string // whose chain it reads
	rec    engine.AuditRecord
	done   bool
}

func (c *cursor) advance() error {
	r, err, ok := c.next()
	if !ok {
		c.done = true
		return nil
	}
	if r.Member != c.member {
		// A record of another member's chain in this one (moved between
		// chains in the store): Build must verify it as this chain's, where
		// it breaks the chain (its hash covers the member it names), not
		// as the chain it names, which it would make whole again.
		r.Member = c.member
	}
	c.rec = r
	return err
}

func (c *cursor) before(d *cursor) bool {
	if t := c.rec.Time.Compare(d.rec.Time); t != 0 {
		return t < 0
	}
	if c.rec.Member != d.rec.Member {
		return c.rec.Member < d.rec.Member
	}
	return c.rec.Position < d.rec.Position
}
