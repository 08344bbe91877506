package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// slowCollector is an OTLP/HTTP receiver that takes delay over each
// batch, and keeps the positions of the records it took.
type slowCollector struct {
	t     *testing.T
	delay time.Duration

	mu        sync.Mutex
	positions []uint64
}

func (c *slowCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	time.Sleep(c.delay)
	var req collogs.ExportLogsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		c.t.Errorf("decode: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				var rec engine.AuditRecord
				if err := json.Unmarshal([]byte(lr.Body.GetStringValue()), &rec); err != nil {
					c.t.Errorf("body is not a record: %v", err)
					continue
				}
				c.positions = append(c.positions, rec.Position)
			}
		}
	}
	c.mu.Unlock()
	b, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// took says whether the collector took positions 1 to n, each once, in
// order.
func (c *slowCollector) took(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.positions) != n {
		return fmt.Sprintf("%d records, want %d", len(c.positions), n)
	}
	for i, p := range c.positions {
		if p != uint64(i+1) {
			return fmt.Sprintf("record %d at position %d", i, p)
		}
	}
	return ""
}

// ingestWithSinks ingests n messages on a memory store with the sinks
// given as YAML flow sequence items, each slower sink's batch delayed, and
// returns what ingest wrote on Err.
func ingestWithSinks(t *testing.T, n int, sinks string) string {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: memory}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  sinks: [%s]
`, sinks), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var feed strings.Builder
	for i := range n {
		fmt.Fprintf(&feed, `{"topic":"plant/m1/energy","payload":{"msgId":"m-%d"}}`+"\n", i)
	}
	errOut := &bytes.Buffer{}
	tool := &Tool{Config: cfg, Out: io.Discard, Err: errOut}
	if err := tool.Ingest(t.Context(), IngestOptions{Input: strings.NewReader(feed.String()), Name: "feed", DrainTimeout: time.Second}); err != nil {
		t.Fatalf("ingest: %v\n%s", err, errOut)
	}
	return errOut.String()
}

// shortenSinkFlushIdle makes ingest give up on sinks idle for d.
func shortenSinkFlushIdle(t *testing.T, d time.Duration) {
	old := sinkFlushIdle
	sinkFlushIdle = d
	t.Cleanup(func() { sinkFlushIdle = old })
}

// TestIngestWaitsForASlowSinkThatKeepsDelivering: a sink that takes
// longer in all than the sinks' flush bound, but delivers a batch well
// within it each time, has every record once ingest returns.
func TestIngestWaitsForASlowSinkThatKeepsDelivering(t *testing.T) {
	shortenSinkFlushIdle(t, 2*time.Second)
	coll := &slowCollector{t: t, delay: 300 * time.Millisecond}
	srv := httptest.NewServer(coll)
	defer srv.Close()
	const n = 5000 // 10 batches of 512: 3 s of delays, more than the idle bound
	errs := ingestWithSinks(t, n, fmt.Sprintf(`{name: slow, kind: otlp, endpoint: '%s/v1/logs'}`, srv.URL))
	if strings.Contains(errs, "undelivered") {
		t.Fatalf("ingest left records of a delivering sink undelivered:\n%s", errs)
	}
	if why := coll.took(n); why != "" {
		t.Fatalf("the slow sink's collector, once ingest returned: %s", why)
	}
}

// TestIngestStopsWaitingForADeadSinkOnceTheOthersDelivered: beside a
// slow sink that keeps delivering, a syslog sink nobody listens on holds
// ingest only for the idle bound after the slow one is done; ingest says
// what the dead one left, and the slow one has every record.
func TestIngestStopsWaitingForADeadSinkOnceTheOthersDelivered(t *testing.T) {
	shortenSinkFlushIdle(t, 2*time.Second)
	coll := &slowCollector{t: t, delay: 300 * time.Millisecond}
	srv := httptest.NewServer(coll)
	defer srv.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	const n = 5000
	start := time.Now()
	errs := ingestWithSinks(t, n, fmt.Sprintf(`{name: slow, kind: otlp, endpoint: '%s/v1/logs'}, {name: siem, kind: syslog, address: '%s'}`, srv.URL, addr))
	took := time.Since(start)
	if !strings.Contains(errs, fmt.Sprintf("sink siem delivered up to 0 of %d", n)) || strings.Contains(errs, "sink slow") {
		t.Fatalf("ingest with a dead sink beside a slow one said:\n%s", errs)
	}
	if why := coll.took(n); why != "" {
		t.Fatalf("the slow sink's collector, once ingest returned: %s", why)
	}
	if took > 30*time.Second { // without the idle bound it waits for the dead sink for good
		t.Fatalf("ingest took %s with a dead sink", took)
	}
}
