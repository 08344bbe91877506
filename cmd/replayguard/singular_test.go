package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A count of one reads in the singular: "1 record", "1 change", not
// "1 records".
func TestACountOfOneTakesTheSingular(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, "")
	capture := filepath.Join(dir, "meter.jsonl")
	line := `{"topic":"plant/meter-1/energy","payload":{"msgId":"m-1","kwh":0.25,"kw":16}}` + "\n"
	if err := os.WriteFile(capture, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "ingest", "-c", cfg, capture)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "meter/meter-1"}, "meter/meter-1: 1 change, 0 replays suppressed\n"},
		{[]string{"audit", "verify"}, "audit chain intact: 1 record\n"},
	} {
		if out := mustRun(t, "", append(c.args, "-c", cfg)...); !strings.Contains(out, c.want) {
			t.Errorf("%v:\n%s\nwant %q", c.args, out, c.want)
		}
	}
	if out := mustRun(t, "", "bench", "--messages", "1", "--dir", filepath.Join(dir, "bench")); !strings.HasPrefix(out, "1 message (0 MB) in ") {
		t.Errorf("bench --messages 1:\n%s\nwant it to begin %q", out, "1 message (0 MB) in ")
	}
}
