package app

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
)

// meterTool is a Tool on a new embedded store under dir, with one id route
// of meter readings whose effect on meter/{topic[1]} is effect (a YAML
// mapping's lines, such as "add: {kwh: kwh}").
func meterTool(t *testing.T, dir, effect string) *Tool {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `
store: {kind: embedded, path: %q}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "meter/{topic[1]}"
        %s
`, filepath.Join(dir, "data"), strings.ReplaceAll(effect, "\n", "\n        ")), "meters.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Tool{Config: cfg, Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
}

// ingest decides feed (JSON Lines) with tool, its summary discarded.
func ingest(t *testing.T, tool *Tool, feed string) {
	t.Helper()
	out := tool.Out
	tool.Out = &bytes.Buffer{}
	defer func() { tool.Out = out }()
	if err := tool.Ingest(t.Context(), IngestOptions{Input: strings.NewReader(feed), Name: "feed", DrainTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
}
