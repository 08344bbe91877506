package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigPrintShowsNoSecret(t *testing.T) {
	t.Setenv("OTLP_KEY", "k3y-s3cret")
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	if err := os.WriteFile(cfg, []byte(`store: {kind: embedded, path: ./data}
audit:
  sinks:
    - {name: otel, kind: otlp, endpoint: "http://collector:4318/v1/logs", headers: {X-Api-Key: "${OTLP_KEY}"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "", "config", "print", "-c", cfg)
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "X-Api-Key: xxxxx\n") {
		t.Errorf("config print shows the header's value, or not its name:\n%s", out)
	}
	if !strings.Contains(out, "cached_rows: 100000\n") {
		t.Errorf("config print leaves out the default of store.cached_rows:\n%s", out)
	}
}
