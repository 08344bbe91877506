package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestOneCaptureIngestedByTwoSpellingsOfItsPathIsOneBrokerInTheReport(t *testing.T) {
	cfg := testConfig(t, "")
	dir := t.TempDir()
	feed := filepath.Join(dir, "feed.jsonl")
	lines := `{"topic":"plant/meter-3/energy","payload":{"msgId":"m1","kwh":0.25}}` + "\n"
	if err := os.WriteFile(feed, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "ingest", "-c", cfg, feed)
	t.Chdir(dir)
	if err := os.Mkdir("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(feed, []byte(`{"topic":"plant/meter-3/energy","payload":{"msgId":"m2","kwh":0.5}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "ingest", "-c", cfg, "./sub/../feed.jsonl")
	mustRun(t, "", "ingest", "-c", cfg, "feed.jsonl")
	var rep struct {
		BrokerChanges []struct {
			Position uint64
			From, To string
		} `json:"broker_changes"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "", "report", "--format", "json", "-c", cfg)), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.BrokerChanges) != 1 || rep.BrokerChanges[0].To != feed {
		t.Fatalf("broker changes %+v, want the first delivery's only, from %s", rep.BrokerChanges, feed)
	}
}
