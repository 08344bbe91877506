package memory

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

func TestAuditLogScansAcrossPages(t *testing.T) {
	const n = 2*auditPage + 10
	var l auditLog
	for i := range uint64(n) {
		l.append(engine.AuditRecord{Position: i + 1})
	}
	for _, from := range []uint64{1, 2, auditPage, auditPage + 1, 2 * auditPage, 2*auditPage + 1, n, n + 1, 5 * auditPage} {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			want := from
			err := l.view().scan(from, func(r *engine.AuditRecord) error {
				if r.Position != want {
					return fmt.Errorf("position %d, want %d", r.Position, want)
				}
				want++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if end := max(from, n+1); want != end {
				t.Errorf("scan ended before position %d, want %d", want, end)
			}
		})
	}
}
