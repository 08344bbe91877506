package report

import (
	"context"
	"errors"
	"iter"

	"github.com/replayguard/replayguard/engine"
)

// errStop ends a scan whose reader stopped early.
var errStop = errors.New("report: stop")

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

// Records is a single-owner store's log from its first record.
func Records(ctx context.Context, s engine.AuditScanner) iter.Seq2[engine.AuditRecord, error] {
	return Scanned(func(fn func(engine.AuditRecord) error) error { return s.ScanAudit(ctx, 1, fn) })
}

// Chains is every member's chain of a shared store, each from its first
// record, merged by time (ties by member, then position), with the chain
// heads the store keeps for Options.Heads.
func Chains(ctx context.Context, cs engine.ChainScanner) (iter.Seq2[engine.AuditRecord, error], map[string]engine.AuditHead, error) {
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
			next, stop := iter.Pull2(Scanned(func(fn func(engine.AuditRecord) error) error {
				return cs.ScanChain(ctx, c.Member, 1, fn)
			}))
			defer stop()
			curs = append(curs, &cursor{next: next})
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
	next func() (engine.AuditRecord, error, bool)
	rec  engine.AuditRecord
	done bool
}

func (c *cursor) advance() error {
	r, err, ok := c.next()
	if !ok {
		c.done = true
		return nil
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
