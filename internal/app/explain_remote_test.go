package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/web"
)

// threeMeters is a meter Tool whose store holds four readings of two
// meters, one of them a replay.
func threeMeters(t *testing.T) *Tool {
	t.Helper()
	tool := meterTool(t, t.TempDir(), "add: {kwh: kwh}")
	ingest(t, tool, `{"topic":"plant/m1/energy","payload":{"msgId":"a","kwh":1.5}}
{"topic":"plant/m2/energy","payload":{"msgId":"b","kwh":2}}
{"topic":"plant/m1/energy","payload":{"msgId":"c","kwh":0.25}}
{"topic":"plant/m1/energy","payload":{"msgId":"a","kwh":1.5}}
`)
	return tool
}

// holdStore holds tool's store as `run` does, and serves the API the
// commands then go through: stats, audit pages and explain as the daemon
// serves them. It returns how many audit pages were asked for.
func holdStore(t *testing.T, tool *Tool) *atomic.Int64 {
	t.Helper()
	held, err := Open(t.Context(), tool.Config, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	var auditPages atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/explain/{entity...}", func(w http.ResponseWriter, r *http.Request) {
		q := web.ExplainQuery{Entity: r.PathValue("entity")}
		if at := r.URL.Query().Get("at"); at != "" {
			q.At, _ = time.Parse(time.RFC3339Nano, at)
		}
		ls, err := StoreLineages(r.Context(), held.Store, "", report.LineageOptions{Entities: []string{q.Entity}, At: q.At})
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case len(ls[0].Changes) == 0:
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("%v: %v", web.ErrNoLineage, explainNone(ls[0]))})
		default:
			json.NewEncoder(w).Encode(ls[0])
		}
	})
	mux.HandleFunc("/api/v1/stats", func(w http.ResponseWriter, r *http.Request) {
		snap, err := held.Snapshot(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"position": snap.AuditHead.Position, "head": snap.AuditHead.Hash})
	})
	mux.HandleFunc("/api/v1/audit", func(w http.ResponseWriter, r *http.Request) {
		auditPages.Add(1)
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		page := []engine.AuditRecord{}
		held.Store.ScanAudit(r.Context(), max(from, 1), func(rec engine.AuditRecord) error { page = append(page, rec); return nil })
		json.NewEncoder(w).Encode(map[string]any{"records": page, "next": nil})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tool.Config.HTTP.Listen = strings.TrimPrefix(srv.URL, "http://")
	return &auditPages
}

// While a running process holds the store, explain asks that process for
// the lineage (one request) instead of reading its whole audit log page by
// page through the API: a fleet's log is hundreds of megabytes of JSON for
// one meter's few records. What it prints is what a read of the store
// prints, and so is the error for an entity no decision changed.
func TestExplainThroughTheAPIAsksForTheLineageNotTheLog(t *testing.T) {
	tool := threeMeters(t)
	explain := func(entity string) (string, error) {
		var out bytes.Buffer
		tool.Out = &out
		err := tool.Explain(t.Context(), ExplainOptions{Entity: entity})
		return out.String(), err
	}
	local, err := explain("meter/m1")
	if err != nil || !strings.Contains(local, "meter/m1: 2 changes, 1 replay suppressed") {
		t.Fatalf("explain from the store: %q, %v", local, err)
	}
	_, localNone := explain("meter/m9")
	if localNone == nil {
		t.Fatal("explain of an entity no decision changed: no error")
	}

	auditPages := holdStore(t, tool)
	remote, err := explain("meter/m1")
	if err != nil || remote != local {
		t.Fatalf("explain through the API: %q, %v; want what the store gave, %q", remote, err, local)
	}
	if _, err := explain("meter/m9"); err == nil || err.Error() != localNone.Error() {
		t.Fatalf("explain through the API of an entity no decision changed: %v; want %v", err, localNone)
	}
	if n := auditPages.Load(); n != 0 {
		t.Fatalf("explain read %d pages of the audit log through the API; want the lineage asked for", n)
	}
}

// The report through the API reads the log once, for its figures; the
// lineages of the entities it names and of the most replayed are the
// running process's to read, and are those a read of the store gives.
func TestReportThroughTheAPIReadsTheLogOnce(t *testing.T) {
	tool := threeMeters(t)
	reportOf := func(entities ...string) (*report.Report, error) {
		var out bytes.Buffer
		tool.Out = &out
		if err := tool.Report(t.Context(), ReportOptions{Format: "json", Entities: entities}); err != nil {
			return nil, err
		}
		var rep report.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return &rep, nil
	}
	local, err := reportOf("meter/m2")
	if err != nil {
		t.Fatal(err)
	}
	_, localNone := reportOf("meter/m9")
	if localNone == nil {
		t.Fatal("a report naming an entity no decision changed: no error")
	}

	auditPages := holdStore(t, tool)
	remote, err := reportOf("meter/m2")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(local.Lineages)
	if got, _ := json.Marshal(remote.Lineages); string(got) != string(want) || len(remote.Lineages) != 2 {
		t.Fatalf("the report's lineages through the API:\n%s\nwant those of the store:\n%s", got, want)
	}
	if n := auditPages.Load(); n != 1 {
		t.Fatalf("the report read the audit log %d times through the API; want once", n)
	}
	if _, err := reportOf("meter/m9"); err == nil || err.Error() != localNone.Error() {
		t.Fatalf("a report through the API naming an entity no decision changed: %v; want %v", err, localNone)
	}
}
