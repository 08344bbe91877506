package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
)

const sparkplugConfig = `store: %s
routes:
  - name: plant
    kind: sparkplug
    topic: spBv1.0/plant/#
    effects:
      - entity: "meter/{topic[3]}"
        add: {pulses: metrics.Pulses}
        set: {kwh: metrics.Energy}
`

// A captured Sparkplug feed through ingest, into the embedded store and
// into a consumer group's on PostgreSQL and Redis: the seq crosses
// 255 → 0 with replays on both sides of the wrap, the edge dies and is born
// again with a new bdSeq, and the old session is replayed after it; every
// replay is a duplicate, every pulse counted once, the chain verifies.
func TestIngestASparkplugCapture(t *testing.T) {
	for _, c := range []struct {
		name   string
		store  func(t *testing.T) string
		verify string // the end of audit verify's output
	}{
		{"embedded", func(t *testing.T) string {
			return fmt.Sprintf("{kind: embedded, path: %s}", filepath.Join(t.TempDir(), "data"))
		},
			"audit chain intact: 279 records\n"},
		{"postgres", func(t *testing.T) string {
			return fmt.Sprintf("{kind: postgres, url: %q}", testbroker.StartPostgres(t, testbroker.PostgresOptions{}).URL())
		}, "audit chains intact: 1 member, 279 records\n"},
		{"redis", func(t *testing.T) string {
			return fmt.Sprintf("{kind: redis, url: %q}", testbroker.StartRedis(t, testbroker.RedisOptions{}).URL())
		}, "audit chains intact: 1 member, 279 records\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name != "embedded" && testing.Short() {
				t.Skip("starts a PostgreSQL or Redis server")
			}
			ingestSparkplug(t, c.store(t), c.verify)
		})
	}
}

func ingestSparkplug(t *testing.T, store, verify string) {
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(sparkplugConfig, store)), 0o644)
	ts := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	next := func() time.Time { ts = ts.Add(time.Second); return ts }
	edge := sparkplug.NewEdge("plant", "m1", 255)
	metrics := []sparkplug.Metric{{Name: "Energy", Datatype: sparkplug.Double, Value: 0.0}, {Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(0)}}
	var feed, session []sparkplug.Message
	feed = append(feed, edge.Birth(next(), metrics))
	for i := range 260 {
		m := edge.Data(next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}, {Name: "Energy", Value: float64(i) / 4}})
		session = append(session, m)
		feed = append(feed, m)
	}
	feed = append(feed, session[250:258]...) // replays across the wrap
	feed = append(feed, edge.Death(next()))
	edge.NewSession() // bdSeq 255 → 0
	feed = append(feed, edge.Birth(next(), metrics))
	for range 3 {
		feed = append(feed, edge.Data(next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}}))
	}
	feed = append(feed, session[:5]...) // the old session replayed after the rebirth
	var lines []string
	for _, m := range feed {
		b, _ := json.Marshal(map[string]string{"topic": m.Topic, "payload_b64": base64.StdEncoding.EncodeToString(m.Payload)})
		lines = append(lines, string(b))
	}
	out := mustRun(t, strings.Join(lines, "\n")+"\n", "ingest", "-c", cfg, "-")
	if want := "applied=266 applied_late=0 duplicate=13 conflict=0 quarantined=0 malformed=0 total=279\n"; out != want {
		t.Fatalf("summary %q, want %q", out, want)
	}
	var state map[string]map[string]any
	json.Unmarshal([]byte(mustRun(t, "", "state", "--json", "-c", cfg)), &state)
	if got := fmt.Sprint(state["meter/m1"]["pulses"]); got != "263" {
		t.Fatalf("pulses %s, want 263 (260 + 3, no replay counted)", got)
	}
	var sources []struct {
		Epoch     string
		High      int64
		Sparkplug struct {
			Online         bool
			BdSeq          int64 `json:"bdseq"`
			BdSeqUnwrapped int64 `json:"bdseq_unwrapped"`
		}
	}
	json.Unmarshal([]byte(mustRun(t, "", "sources", "--json", "-c", cfg)), &sources)
	if len(sources) != 1 || sources[0].Epoch != "256" || sources[0].High != 3 || !sources[0].Sparkplug.Online ||
		sources[0].Sparkplug.BdSeq != 0 || sources[0].Sparkplug.BdSeqUnwrapped != 256 {
		t.Fatalf("sources %+v: want epoch 256 (bdSeq 0 after 255), high 3, online", sources)
	}
	if text := mustRun(t, "", "sources", "-c", cfg); !strings.Contains(text, "online bdSeq 0 (unwrapped 256)") {
		t.Fatalf("sources:\n%s", text)
	}
	if out := mustRun(t, "", "audit", "verify", "-c", cfg); !strings.HasSuffix(out, verify) {
		t.Fatalf("audit verify: %q, want it to end with %q", out, verify)
	}
}

// An edge's bdSeq goes 254, 255, 0, 1: sources shows the 1 it sent in its
// NBIRTH, and beside it the unwrapped 257 its epochs carry.
func TestSourcesShowsAnEdgesBdSeqAsTheEdgeSendsIt(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(sparkplugConfig, fmt.Sprintf("{kind: embedded, path: %s}", filepath.Join(t.TempDir(), "data")))), 0o644)
	ts := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	next := func() time.Time { ts = ts.Add(time.Second); return ts }
	edge := sparkplug.NewEdge("plant", "m1", 254)
	metrics := []sparkplug.Metric{{Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(0)}}
	var lines []string
	add := func(m sparkplug.Message) {
		b, _ := json.Marshal(map[string]string{"topic": m.Topic, "payload_b64": base64.StdEncoding.EncodeToString(m.Payload)})
		lines = append(lines, string(b))
	}
	for range 3 { // sessions 254, 255, 0
		add(edge.Birth(next(), metrics))
		add(edge.Data(next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}}))
		add(edge.Death(next()))
		edge.NewSession()
	}
	add(edge.Birth(next(), metrics))
	mustRun(t, strings.Join(lines, "\n")+"\n", "ingest", "-c", cfg, "-")
	var sources []struct {
		Epoch     string
		Sparkplug map[string]any
	}
	out := mustRun(t, "", "sources", "--json", "-c", cfg)
	json.Unmarshal([]byte(out), &sources)
	if len(sources) != 1 || sources[0].Epoch != "257" || sources[0].Sparkplug["bdseq"] != 1.0 || sources[0].Sparkplug["bdseq_unwrapped"] != 257.0 {
		t.Fatalf("sources --json:\n%s\nwant bdseq 1 as sent, bdseq_unwrapped 257 and epoch 257", out)
	}
	if text := mustRun(t, "", "sources", "-c", cfg); !strings.Contains(text, " 257 ") || !strings.Contains(text, "online bdSeq 1 (unwrapped 257), birth ") {
		t.Fatalf("sources:\n%s", text)
	}
}
