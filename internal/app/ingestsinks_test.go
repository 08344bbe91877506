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

// count is how many records the collector took.
func (c *slowCollector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.positions)
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
	tool, errOut := sinkTool(t, "{kind: memory}", sinks)
	if err := tool.Ingest(t.Context(), IngestOptions{Input: strings.NewReader(meterFeed(0, n)), Name: "feed", DrainTimeout: time.Second}); err != nil {
		t.Fatalf("ingest: %v\n%s", err, errOut)
	}
	return errOut.String()
}

// sinkTool is a Tool on the store given as a YAML flow mapping, one route
// of meters, and the audit sinks given as YAML flow sequence items; the
// buffer holds what it writes on Err.
func sinkTool(t *testing.T, store, sinks string) (*Tool, *bytes.Buffer) {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `store: %s
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  sinks: [%s]
`, store, sinks), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	errOut := &bytes.Buffer{}
	return &Tool{Config: cfg, Out: io.Discard, Err: errOut}, errOut
}

// meterFeed is the lines of the meters' messages from..to-1, one meter.
func meterFeed(from, to int) string {
	var feed strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&feed, `{"topic":"plant/m1/energy","payload":{"msgId":"m-%d"}}`+"\n", i)
	}
	return feed.String()
}

// TestIngestStreamsToTheSinksAsItDecides: a sink has the records of a
// long ingest's first messages while the feed still runs, as under run,
// not only once it ends; and, once ingest returns, every record once, in
// order: the handover from the stream to the final flush sends none twice.
func TestIngestStreamsToTheSinksAsItDecides(t *testing.T) {
	for name, store := range map[string]string{"memory": "{kind: memory}", "embedded": "{kind: embedded, path: " + t.TempDir() + "}"} {
		t.Run(name, func(t *testing.T) {
			coll := &slowCollector{t: t, delay: 20 * time.Millisecond}
			srv := httptest.NewServer(coll)
			defer srv.Close()
			tool, errOut := sinkTool(t, store, fmt.Sprintf(`{name: siem, kind: otlp, endpoint: '%s/v1/logs'}`, srv.URL))
			feed, w := io.Pipe()
			ingested := make(chan error, 1)
			go func() {
				ingested <- tool.Ingest(t.Context(), IngestOptions{Input: feed, Name: "feed", BatchSize: 100, DrainTimeout: time.Second})
			}()
			if _, err := io.WriteString(w, meterFeed(0, 3000)); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); coll.count() == 0; time.Sleep(10 * time.Millisecond) {
				select {
				case err := <-ingested:
					t.Fatalf("ingest ended before its feed did: %v\n%s", err, errOut)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the sink took no record of 3,000 decided while the feed runs on")
				}
			}
			if _, err := io.WriteString(w, meterFeed(3000, 6000)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if err := <-ingested; err != nil {
				t.Fatalf("ingest: %v\n%s", err, errOut)
			}
			if why := coll.took(6000); why != "" {
				t.Fatalf("the sink's collector, once ingest returned: %s\n%s", why, errOut)
			}
		})
	}
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
