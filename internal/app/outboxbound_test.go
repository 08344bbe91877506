package app

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
)

// TestAnIngestWhoseBatchPassesTheOutboxBoundIsRefused: with --batch above
// outbox.max_entries every batch would fill the outbox past its bound and
// the gate turn full and back at each; ingest refuses before deciding
// anything, naming both settings, and takes a batch within the bound.
func TestAnIngestWhoseBatchPassesTheOutboxBoundIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse(fmt.Appendf(nil, `
store: {kind: embedded, path: %q}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "meter/{topic[1]}"
        add: {kwh: kwh}
      - forward: {webhook: "http://127.0.0.1:1/hook"}
outbox: {max_entries: 10}
`, filepath.Join(dir, "data")), "meters.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	tool := &Tool{Config: cfg, Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	feed := `{"topic":"plant/m1/energy","payload":{"msgId":"a","kwh":1}}` + "\n"
	err = tool.Ingest(t.Context(), IngestOptions{Input: strings.NewReader(feed), Name: "feed", DrainTimeout: time.Second})
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "outbox.max_entries: max_entries 10 is below what one batch can add, --batch 1000 = 1000 entries") {
		t.Fatalf("ingest with the default batch: %v", err)
	}
	if out := tool.Out.(*bytes.Buffer).String(); out != "" {
		t.Fatalf("refused ingest decided: %q", out)
	}
	err = tool.Ingest(t.Context(), IngestOptions{Input: strings.NewReader(feed), Name: "feed", BatchSize: 10, DrainTimeout: 200 * time.Millisecond})
	if err != nil && strings.Contains(err.Error(), "max_entries") {
		t.Fatalf("ingest with --batch 10: %v", err)
	}
}
