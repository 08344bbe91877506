package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
)

// A Tool runs one command at a time on a configuration: here `ingest`,
// whose replay of msgId m-1 is a duplicate, then `state`.
func ExampleTool() {
	dir, err := os.MkdirTemp("", "replayguard-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
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
`, filepath.Join(dir, "data")), "example.yaml", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	feed := `{"topic":"plant/meter-3/energy","payload":{"msgId":"m-1","kwh":0.25}}
{"topic":"plant/meter-3/energy","payload":{"msgId":"m-1","kwh":0.25}}
{"topic":"plant/meter-3/energy","payload":{"msgId":"m-2","kwh":0.5}}
`
	ctx := context.Background()
	t := &app.Tool{Config: cfg, Out: os.Stdout}
	if err := t.Ingest(ctx, app.IngestOptions{Input: strings.NewReader(feed), Name: "example", DrainTimeout: time.Second}); err != nil {
		fmt.Println(err)
		return
	}
	if err := t.State(ctx, false); err != nil {
		fmt.Println(err)
	}
	// Output:
	// applied=2 applied_late=0 duplicate=1 conflict=0 quarantined=0 malformed=0 total=3
	// meter/meter-3  kwh=0.75
}
