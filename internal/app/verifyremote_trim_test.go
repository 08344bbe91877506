package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// trimmingAPI serves the log of st in pages of 1000, as the process that
// holds the store does, and runs between once, after the first page: the
// process's retention trimming meanwhile.
func trimmingAPI(t *testing.T, st *memory.Store, head uint64, between func()) *remote {
	t.Helper()
	pages := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]uint64{"position": head})
	})
	mux.HandleFunc("/api/v1/audit", func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		page := struct {
			Records []engine.AuditRecord `json:"records"`
			Next    *uint64              `json:"next"`
		}{Records: []engine.AuditRecord{}}
		st.ScanAudit(r.Context(), from, func(rec engine.AuditRecord) error {
			if len(page.Records) == limit {
				next := rec.Position
				page.Next = &next
				return errStopPage
			}
			page.Records = append(page.Records, rec)
			return nil
		})
		if limit > 1 { // not verify's look at the first record the store holds
			if pages++; pages == 1 && between != nil {
				between() // after the page was read, before it is sent
			}
		}
		json.NewEncoder(w).Encode(page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &remote{base: srv.URL, client: srv.Client()}
}

var errStopPage = fmt.Errorf("page full")

// TestAuditVerifyThroughTheAPIWhileRetentionTrims: the process that holds
// the store runs audit retention; a pass that archives and trims records
// while audit verify reads the log page by page is no break, with or
// without the archive.
func TestAuditVerifyThroughTheAPIWhileRetentionTrims(t *testing.T) {
	for _, withArchive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive %v", withArchive), func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			e := meterEngine(t, st)
			msgs := make([]engine.Message, 4000)
			for i := range msgs {
				msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r%d","kwh":1}`, i)}
			}
			if _, err := e.Process(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			retain := func(keep uint64) {
				r, err := audit.NewRetention(st, audit.RetentionOptions{Archive: dir, MaxRecords: keep, SegmentRecords: 1000,
					Head: func(context.Context) (uint64, error) { return e.Stats().Position, nil }})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Once(ctx); err != nil {
					t.Fatal(err)
				}
			}
			retain(3000) // 1..1000 archived, 1001..4000 stored
			archive := ""
			if withArchive {
				archive = dir
			}
			var out bytes.Buffer
			api := trimmingAPI(t, st, e.Stats().Position, func() { retain(500) }) // 1001..3500 archived meanwhile
			if err := (&Tool{Out: &out}).verifyRemote(ctx, api, archive); err != nil {
				t.Fatalf("verify while retention trimmed: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "intact") {
				t.Fatalf("verify = %q", out.String())
			}
			t.Log(out.String())
		})
	}
}
