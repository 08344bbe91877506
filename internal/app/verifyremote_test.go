package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// apiLog serves /api/v1/stats with head and /api/v1/audit with records, as
// the process that holds the store does; without the head's hash when it
// is zero, as a build before the API gave it.
func apiLog(t *testing.T, head engine.AuditHead, records []engine.AuditRecord) *remote {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		stats := map[string]any{"position": head.Position}
		if !head.Hash.IsZero() {
			stats["head"] = head.Hash
		}
		json.NewEncoder(w).Encode(stats)
	})
	mux.HandleFunc("/api/v1/audit", func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		page := []engine.AuditRecord{}
		for _, rec := range records {
			if rec.Position >= from {
				page = append(page, rec)
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"records": page, "next": nil})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &remote{base: srv.URL, client: srv.Client()}
}

// meterEngine is an engine on st with one id route, meters: each reading's
// kwh added into meter/{topic[1]}. It is closed when the test ends.
func meterEngine(t *testing.T, st engine.Store) *engine.Engine {
	t.Helper()
	e, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{{Name: "meters", Topic: "plant/+/energy",
		Source: []string{"topic[1]"}, ID: "msgId", Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// fiveReadings is a memory store whose log holds five applied readings,
// one record each.
func fiveReadings(t *testing.T) *memory.Store {
	t.Helper()
	st := memory.New()
	e := meterEngine(t, st)
	defer e.Close()
	for i := range 5 {
		if _, err := e.Process(context.Background(), []engine.Message{{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r%d","kwh":1}`, i)}}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestAuditVerifyThroughTheAPIReachesTheHead: verified through the API of
// the process that holds the store, the log must reach the head that
// process committed (a removed tail is broken, not intact) and end in the
// record the head names (a rewritten last record is broken), and records
// committed after the head was read are not counted against it.
func TestAuditVerifyThroughTheAPIReachesTheHead(t *testing.T) {
	ctx := context.Background()
	st := fiveReadings(t)
	var recs []engine.AuditRecord
	if err := st.ScanAudit(ctx, 1, func(r engine.AuditRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	// the last record rewritten, with a hash of its own that links to the
	// one before: the chain holds, only the head tells
	rewritten := append([]engine.AuditRecord(nil), recs...)
	last := &rewritten[4]
	last.Reason = "rewritten"
	h, err := engine.ChainHash(*last)
	if err != nil {
		t.Fatal(err)
	}
	last.Hash = h
	head := func(i int) engine.AuditHead { return engine.AuditHead{Position: recs[i].Position, Hash: recs[i].Hash} }
	position := func(i int) engine.AuditHead { return engine.AuditHead{Position: recs[i].Position} }
	for _, tc := range []struct {
		name    string
		head    engine.AuditHead
		records []engine.AuditRecord
		want    string
	}{
		{"the whole log", head(4), recs, "audit chain intact: 5 records\n"},
		{"a record committed after the head was read", head(3), recs, "audit chain intact: 4 records\n"},
		{"the tail removed", head(4), recs[:4], "log ends at position 4 but the chain head is at 5"},
		{"the last record rewritten", head(4), rewritten, "the last record's hash does not match the chain head at position 5"},
		{"the head's position only, from an older build", position(4), recs, "audit chain intact: 5 records\n"},
		{"the tail removed, the head's position only", position(4), recs[:4], "log ends at position 4 but the chain head is at 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			tool := &Tool{Out: &out}
			err := tool.verifyRemote(ctx, apiLog(t, tc.head, tc.records), "")
			if got := out.String(); err != nil && !strings.Contains(err.Error(), tc.want) || err == nil && got != tc.want {
				t.Fatalf("verify = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestAuditVerifyOfAnExportSaysWhereItBegins: an export that begins after
// position 1 verifies, and the result says which positions it cannot
// vouch for.
func TestAuditVerifyOfAnExportSaysWhereItBegins(t *testing.T) {
	ctx := context.Background()
	st := fiveReadings(t)
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Export(ctx, st, 3, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var out bytes.Buffer
	if err := (&Tool{Out: &out}).verifyFile(ctx, file, false); err != nil {
		t.Fatal(err)
	}
	want := "audit chain intact as far as the file goes: 3 records\nthe chain begins at position 3 in the file: positions 1..2 are not in it (archived by retention, or exported from a later position) and are not verified\n"
	if !strings.HasPrefix(out.String(), want) {
		t.Fatalf("verify --file of an export from position 3:\n%s\nwant\n%s", out.String(), want)
	}
}
