package app

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/web"
)

// leadingGone is a store whose first records were removed without its
// audit base moving, as an edit of the store's file would leave it.
type leadingGone struct {
	*memory.Store
	gone uint64 // positions 1..gone
}

func (s leadingGone) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	return s.Store.ScanAudit(ctx, max(from, s.gone+1), fn)
}

// TestAuditVerifyThroughTheAPIChecksTheStoresBase: verified through the
// API of the process that holds the store, a log whose first records were
// removed while the store's audit base stayed where it was is broken, not
// a log that retention trimmed; one that retention trimmed verifies from
// its base.
func TestAuditVerifyThroughTheAPIChecksTheStoresBase(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		trim    bool
		want    string
		wantErr bool
	}{
		{"the first records removed", false, "broken at position 1: positions 1..2 are missing from the store: audit retention never moved a record of the chain out of the store", true},
		{"the first records trimmed by retention", true, "audit chain intact from the store's base: 3 records, positions 3..5", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fiveReadings(t)
			var log web.AuditLog = leadingGone{st, 2}
			if tc.trim {
				r, err := audit.NewRetention(st, audit.RetentionOptions{Archive: t.TempDir(), MaxRecords: 3,
					Head: func(context.Context) (uint64, error) { return 5, nil }})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Once(ctx); err != nil {
					t.Fatal(err)
				}
				log = st
			}
			e := meterEngine(t, st)
			srv := httptest.NewServer(web.New(web.Config{}, web.Deps{Engine: e, Audit: log, Quarantine: st}).Handler())
			t.Cleanup(srv.Close)
			var out bytes.Buffer
			err := (&Tool{Out: &out}).verifyRemote(ctx, &remote{base: srv.URL, client: srv.Client()}, "")
			switch {
			case tc.wantErr && (!errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("verify = %q, %v; want broken: %q", out.String(), err, tc.want)
			case !tc.wantErr && (err != nil || !strings.Contains(out.String(), tc.want)):
				t.Fatalf("verify = %q, %v; want %q", out.String(), err, tc.want)
			}
		})
	}
}
