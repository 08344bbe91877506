package memory

import (
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// auditPage is the number of records per page of the audit log.
const auditPage = 4096

// auditLog holds records in fixed-size pages, so that it grows without
// copying what it holds. Record i (position i+1) is
// pages[i/auditPage-dropped][i%auditPage]. Records never change once
// appended, which lets a view be read without the store's lock. Audit
// retention drops whole pages below the store's base (dropped counts
// them); the records of the page that straddles the base stay in memory,
// out of sight of scans, until their page goes.
type auditLog struct {
	pages   [][]engine.AuditRecord
	dropped uint64
}

func (l *auditLog) append(r engine.AuditRecord) {
	if n := len(l.pages); n == 0 || len(l.pages[n-1]) == auditPage {
		l.pages = append(l.pages, make([]engine.AuditRecord, 0, auditPage))
	}
	last := &l.pages[len(l.pages)-1]
	*last = append(*last, r)
}

// view returns the log as it is now; the caller must hold the store's lock.
// Appends after the call do not show in the view.
func (l *auditLog) view() auditLog {
	return auditLog{pages: slices.Clone(l.pages), dropped: l.dropped}
}

// at returns the record at pos, or nil when it is not held.
func (l *auditLog) at(pos uint64) *engine.AuditRecord {
	i := pos - 1
	p := i / auditPage
	if pos == 0 || p < l.dropped || p-l.dropped >= uint64(len(l.pages)) {
		return nil
	}
	page := l.pages[p-l.dropped]
	if i%auditPage >= uint64(len(page)) {
		return nil
	}
	return &page[i%auditPage]
}

// drop releases the pages whose records are all below below.
func (l *auditLog) drop(below uint64) {
	for len(l.pages) > 1 && (l.dropped+1)*auditPage < below {
		l.pages[0] = nil
		l.pages = l.pages[1:]
		l.dropped++
	}
}

// scan calls fn for each record from position from on; from is above
// every dropped page.
func (l auditLog) scan(from uint64, fn func(*engine.AuditRecord) error) error {
	i := max(from-1, l.dropped*auditPage)
	for p := i / auditPage; p-l.dropped < uint64(len(l.pages)); p++ {
		page := l.pages[p-l.dropped]
		for j := i % auditPage; j < uint64(len(page)); j++ {
			if err := fn(&page[j]); err != nil {
				return err
			}
		}
		i = (p + 1) * auditPage
	}
	return nil
}
