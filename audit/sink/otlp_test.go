package sink_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

// otlpReceiver decodes OTLP/HTTP protobuf log requests. While down it
// answers 503 and keeps nothing.
type otlpReceiver struct {
	recorder
	down       atomic.Bool
	retryAfter string // while down, the Retry-After it answers with
	fails      atomic.Int64
	t          *testing.T
	attrs      atomic.Value // the attributes of the last record, by key
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		o.t.Errorf("request to %s as %s", r.URL.Path, r.Header.Get("Content-Type"))
	}
	if r.Header.Get("X-Api-Key") != "k1" {
		o.t.Errorf("header X-Api-Key = %q", r.Header.Get("X-Api-Key"))
	}
	if o.down.Load() {
		o.fails.Add(1)
		if o.retryAfter != "" {
			w.Header().Set("Retry-After", o.retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var req collogs.ExportLogsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		o.t.Errorf("decode: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				var rec engine.AuditRecord
				if err := json.Unmarshal([]byte(lr.Body.GetStringValue()), &rec); err != nil {
					o.t.Errorf("body is not a record: %v", err)
					continue
				}
				attrs := map[string]string{}
				for _, kv := range lr.Attributes {
					attrs[kv.Key] = kv.Value.String()
				}
				o.attrs.Store(attrs)
				if time.Unix(0, int64(lr.TimeUnixNano)).UTC() != rec.Time.UTC() {
					o.t.Errorf("record %d: timestamp %d, time %s", rec.Position, lr.TimeUnixNano, rec.Time)
				}
				o.add(rec.Position)
			}
		}
	}
	b, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

func TestOTLPCatchesUpAfterTheReceiverWasDown(t *testing.T) {
	recv := &otlpReceiver{t: t}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	exp, err := sink.NewOTLP(t.Context(), sink.OTLPOptions{Endpoint: srv.URL + "/v1/logs", Headers: map[string]string{"X-Api-Key": "k1"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "otel", exp)
	r.decide(t, 100)
	r.waitCursor(t, "otel", 100)

	recv.down.Store(true)
	r.decide(t, 150)
	deadline := time.Now().Add(5 * time.Second)
	for recv.fails.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c, _ := r.st.Cursor(t.Context(), "otel"); c != 100 || recv.fails.Load() < 3 {
		t.Fatalf("while the receiver answers 503: cursor %d (want 100), %d refused requests", c, recv.fails.Load())
	}
	if st := r.set.Status()[0]; st.Backlog != 150 || st.Failures == 0 {
		t.Fatalf("status while down: %+v, want a backlog of 150 and failures", st)
	}
	if logs := r.logs.String(); !strings.Contains(logs, `level=ERROR msg="audit sink delivery failed; retrying from its cursor" sink=otel cursor=100`) {
		t.Fatalf("no failure logged naming the sink:\n%s", logs)
	}
	recv.down.Store(false)
	r.waitCursor(t, "otel", 250)
	checkReceived(t, recv.get(), 250)
	attrs := recv.attrs.Load().(map[string]string)
	if attrs["replayguard.outcome"] == "" || attrs["replayguard.route"] == "" || attrs["replayguard.key"] == "" {
		t.Fatalf("attributes: %v", attrs)
	}
	if st := r.set.Status()[0]; st.Backlog != 0 || st.Cursor != 250 {
		t.Fatalf("status after catch-up: %+v", st)
	}
	want := `
# HELP replayguard_audit_sink_backlog_records Committed audit records a sink has not yet delivered: the chain head minus its cursor.
# TYPE replayguard_audit_sink_backlog_records gauge
replayguard_audit_sink_backlog_records{sink="otel"} 0
# HELP replayguard_audit_sink_delivered_total Audit records a sink delivered (a record delivered again after a failure counts again).
# TYPE replayguard_audit_sink_delivered_total counter
replayguard_audit_sink_delivered_total{sink="otel"} 250
`
	if err := testutil.CollectAndCompare(r.set, strings.NewReader(want),
		"replayguard_audit_sink_backlog_records", "replayguard_audit_sink_delivered_total"); err != nil {
		t.Fatal(err)
	}
}

// A receiver that accepts connections and never answers holds the sink,
// not the decisions.
func TestAStuckSinkNeverHoldsUpDecisions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never read from or answered
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()
	exp, err := sink.NewOTLP(t.Context(), sink.OTLPOptions{Endpoint: "http://" + ln.Addr().String() + "/v1/logs", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "stuck", exp)
	r.decide(t, 10)
	select { // the sink is now inside an export that will not return
	case c := <-accepted:
		accepted <- c
	case <-time.After(5 * time.Second):
		t.Fatal("the sink never connected")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.decide(t, 2000)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("decisions did not complete while the sink was stuck")
	}
	if st := r.set.Status()[0]; st.Cursor != 0 || st.Backlog != 2010 {
		t.Fatalf("stuck sink: %+v, want cursor 0 and a backlog of 2010", st)
	}
}

// A receiver that answers 200 with a partial success has taken the
// request: the records it rejected are not retried (the OTLP spec forbids
// it), so the sink goes on, and says what was rejected.
func TestOTLPPartialSuccessMovesOnAndSaysSo(t *testing.T) {
	var rejected atomic.Int64 // requests the receiver took with a partial success
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		resp := &collogs.ExportLogsServiceResponse{}
		for _, lr := range req.ResourceLogs[0].ScopeLogs[0].LogRecords {
			if strings.Contains(lr.Body.GetStringValue(), `"position":5,`) {
				resp.PartialSuccess = &collogs.ExportLogsPartialSuccess{RejectedLogRecords: 1, ErrorMessage: "record 5 rejected"}
				rejected.Add(1)
			}
		}
		b, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	defer srv.Close()
	logs := &tWriter{t: t}
	exp, err := sink.NewOTLP(t.Context(), sink.OTLPOptions{Endpoint: srv.URL + "/v1/logs", Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "otel", exp)
	r.decide(t, 100)
	r.waitCursor(t, "otel", 100)
	if n := rejected.Load(); n != 1 {
		t.Fatalf("record 5 was sent %d times: the batch the receiver took was sent again", n)
	}
	if !strings.Contains(logs.String(), "record 5 rejected") {
		t.Fatalf("the rejection was not logged:\n%s", logs.String())
	}
	// The receiver took the request, not every record in it: the line
	// says it rejected some, never that it took the records.
	if l := logs.String(); strings.Contains(l, "took the audit records") ||
		!strings.Contains(l, "the receiver rejected some of the batch's audit records (its log records); those are not sent again") {
		t.Fatalf("the partial success is told as:\n%s", l)
	}
}

// TestOTLPWaitsAsTheReceiverAsks: a receiver under load answers 503 with
// Retry-After; the sink waits that long before it sends again, however
// short its own backoff (here 10-50 ms), then delivers everything.
func TestOTLPWaitsAsTheReceiverAsks(t *testing.T) {
	recv := &otlpReceiver{t: t, retryAfter: "2"}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	exp, err := sink.NewOTLP(t.Context(), sink.OTLPOptions{Endpoint: srv.URL + "/v1/logs", Headers: map[string]string{"X-Api-Key": "k1"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recv.down.Store(true)
	r := newRig(t, "otel", exp)
	r.decide(t, 50)
	for deadline := time.Now().Add(5 * time.Second); recv.fails.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := recv.fails.Load(); n != 1 {
		t.Fatalf("%d requests within 1.5 s of a 503 asking for 2 s; want the first only", n)
	}
	recv.down.Store(false)
	r.waitCursor(t, "otel", 50)
	checkReceived(t, recv.get(), 50)
}
