package memory

import (
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// auditPage is the number of records per page of the audit log.
const auditPage = 4096

// auditLog holds records in fixed-size pages, so that it grows without
// copying what it holds. Record i (position i+1) is pages[i/auditPage][i%auditPage].
// Records never change once appended, which lets a view be read without
// the store's lock.
type auditLog struct {
	pages [][]engine.AuditRecord
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
	return auditLog{pages: slices.Clone(l.pages)}
}

// scan calls fn for each record from position from (>= 1) on.
func (l auditLog) scan(from uint64, fn func(*engine.AuditRecord) error) error {
	i := from - 1
	for p := i / auditPage; p < uint64(len(l.pages)); p++ {
		page := l.pages[p]
		for j := i % auditPage; j < uint64(len(page)); j++ {
			if err := fn(&page[j]); err != nil {
				return err
			}
		}
		i = (p + 1) * auditPage
	}
	return nil
}
