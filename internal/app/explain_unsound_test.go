package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/embedded"
)

// tampered is an embedded store whose audit log reads as altered in
// place: the record at altered with its first effect's value changed (a
// byte of the file changed), and the records from cut on gone (the log's
// tail removed, the chain head kept).
type tampered struct {
	*embedded.Store
	altered, cut uint64
}

func (s tampered) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	return s.Store.ScanAudit(ctx, from, func(r engine.AuditRecord) error {
		if s.cut != 0 && r.Position >= s.cut {
			return nil
		}
		if r.Position == s.altered {
			r.Effects[0].Value, r.Effects[0].After = json.RawMessage("9.75"), json.RawMessage("9.75")
		}
		return fn(r)
	})
}

// What explain and the daemon's API read (StoreLineages) is the log as it
// was written or an error naming where it is not: a reading whose value
// was changed in the store, or a log whose last records were removed, is
// never shown as a lineage.
func TestALineageIsNotReadFromATamperedStore(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := meterEngine(t, st)
	for i := range 6 {
		m := engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r%d","kwh":1.25}`, i)}
		if _, err := e.Process(ctx, []engine.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	opts := report.LineageOptions{Entities: []string{"meter/m1"}}
	ls, err := StoreLineages(ctx, st, "", opts)
	if err != nil || len(ls[0].Changes) != 6 {
		t.Fatalf("the store as written: %v, %v", ls, err)
	}
	for _, c := range []struct {
		name string
		st   tampered
		want string
	}{
		{"a value changed", tampered{Store: st, altered: 3}, "broken at position 3: hash does not match the record's content (altered)"},
		{"the last two records removed", tampered{Store: st, cut: 5}, "broken at position 5: log ends at position 4 but the chain head is at 6"},
	} {
		ls, err := StoreLineages(ctx, c.st, "", opts)
		if !errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), c.want) {
			got := "none"
			if ls != nil {
				got = fmt.Sprintf("kwh %s after %d changes", ls[0].State["kwh"], len(ls[0].Changes))
			}
			t.Errorf("%s: a lineage (%s), err %v; want a break saying %q", c.name, got, err, c.want)
		}
	}
}
