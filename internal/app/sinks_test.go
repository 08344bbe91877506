package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// Retention never drops a record a sink has not delivered: while the file
// sink cannot write, nothing leaves the store; once it delivered, retention
// trims down to max_records.
func TestRetentionWaitsForTheSinks(t *testing.T) {
	dir := t.TempDir()
	sinkDir := filepath.Join(dir, "not-yet")
	yaml := fmt.Sprintf(`store: {kind: memory}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  retention: {max_records: 10}
  archive: %s
  sinks: [{name: jsonl, kind: file, path: %s}]
`, filepath.Join(dir, "archive"), filepath.Join(sinkDir, "audit.jsonl"))
	cfg, err := config.Parse([]byte(yaml), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The sink's directory goes away once the sinks are open (a mount
	// lost): they refuse one missing at start.
	if err := os.Mkdir(sinkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := Open(t.Context(), cfg, Options{Sinks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.Remove(sinkDir); err != nil {
		t.Fatal(err)
	}
	msgs := make([]engine.Message, 100)
	for i := range msgs {
		msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d"}`, i)}
	}
	if _, err := a.Engine.Process(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	ret, err := a.Retention()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.FlushSinksUntilIdle(t.Context(), 100*time.Millisecond); err == nil {
		t.Fatal("flush into a missing directory succeeded")
	}
	if res, err := ret.Once(t.Context()); err != nil || res.Records != 0 {
		t.Fatalf("retention with an undelivered sink: %+v, %v; want nothing archived", res, err)
	}
	os.Mkdir(sinkDir, 0o700)
	if err := a.FlushSinksUntilIdle(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if res, err := ret.Once(t.Context()); err != nil || res.Records != 90 {
		t.Fatalf("retention once the sink delivered: %+v, %v; want 90 records archived", res, err)
	}
}
