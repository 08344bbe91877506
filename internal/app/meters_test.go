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

// A fleet on an id route keeps no source windows: sources prints its
// header alone, and says on stderr why, rather than leave an operator to
// wonder where a hundred thousand meters went.
func TestSourcesOfAnIDRouteSaysWhyItListsNone(t *testing.T) {
	tool := meterTool(t, t.TempDir(), "add: {kwh: kwh}")
	ingest(t, tool, `{"topic":"plant/m1/energy","payload":{"msgId":"a","kwh":1.5}}
`)
	var out, errs bytes.Buffer
	tool.Out, tool.Err = &out, &errs
	if err := tool.Sources(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); len(got) != 6 || got[0] != "ROUTE" {
		t.Errorf("sources printed %q, want its header alone", out.String())
	}
	if !strings.Contains(errs.String(), "no source windows") || !strings.Contains(errs.String(), "id route") {
		t.Errorf("sources said %q on stderr, want why it lists none", errs.String())
	}
}
