package sink

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/httpretry"
)

// OTLPOptions configure NewOTLP.
type OTLPOptions struct {
	// Endpoint is the receiver's full URL, http(s)://host:port/v1/logs.
	Endpoint string
	// Headers are sent with every request (an API key, say). Default none.
	Headers map[string]string
	// Timeout bounds one export request. Default 10s.
	Timeout time.Duration
	// TLS verifies an https:// receiver and presents a client
	// certificate. Default nil: the system roots.
	TLS *tls.Config
	// Logger receives a line per batch the receiver answered with a
	// partial success (audit records whose log records it rejected).
	// Default: discard.
	Logger *slog.Logger
}

// OTLP exports each record as an OpenTelemetry log record over OTLP/HTTP
// (protobuf), through the official exporter. A batch is delivered when the
// receiver answered 2xx, a partial success included: the records it
// rejected are logged, never sent again (OTLP forbids retrying them). The
// exporter's own retries are off, so a failure reaches the sink, which
// retries from its cursor.
type OTLP struct {
	exp      *otlploghttp.Exporter
	tr       *http.Transport
	status   *statusTransport
	endpoint string
	log      *slog.Logger
	logger   otellog.Logger
	prov     *sdklog.LoggerProvider
	grab     *grabber
}

// NewOTLP returns an OTLP exporter; it connects on the first Export.
func NewOTLP(ctx context.Context, o OTLPOptions) (*OTLP, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.TLS
	st := &statusTransport{RoundTripper: tr}
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(o.Endpoint), otlploghttp.WithHeaders(o.Headers),
		otlploghttp.WithHTTPClient(&http.Client{Transport: st, Timeout: o.Timeout}),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", o.Endpoint, err)
	}
	// Records are built through a logger provider, the SDK's way to make
	// them, whose only processor hands each one back here; Export then
	// sends them with the exporter itself, so its result is known.
	g := &grabber{}
	res := resource.NewSchemaless(semconv.ServiceName("replayguard"))
	prov := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(g))
	return &OTLP{exp: exp, tr: tr, status: st, endpoint: o.Endpoint, log: o.Logger,
		logger: prov.Logger("github.com/replayguard/replayguard/audit"), prov: prov, grab: g}, nil
}

// Export sends recs in one request, in order.
func (o *OTLP) Export(ctx context.Context, recs []engine.AuditRecord) error {
	o.grab.recs = o.grab.recs[:0]
	var buf []byte
	for i := range recs {
		r := &recs[i]
		var err error
		if buf, err = engine.AppendRecordJSON(buf[:0], r); err != nil {
			return fmt.Errorf("encode record %d: %w", r.Position, err)
		}
		var lr otellog.Record
		lr.SetTimestamp(r.Time)
		lr.SetObservedTimestamp(r.Time)
		lr.SetSeverity(severity(r.Outcome))
		lr.SetSeverityText(r.Outcome)
		lr.SetBody(attribute.StringValue(string(buf)))
		lr.AddAttributes(
			attribute.String("replayguard.outcome", r.Outcome),
			attribute.String("replayguard.route", r.Route),
			attribute.Int64("replayguard.position", int64(r.Position)),
			attribute.String("replayguard.member", r.Member),
			attribute.String("replayguard.key", keyHex(r.Key)),
		)
		o.logger.Emit(ctx, lr)
	}
	if len(o.grab.recs) != len(recs) {
		return fmt.Errorf("otlp: %d of %d records built", len(o.grab.recs), len(recs))
	}
	o.status.last.Store(0)
	o.status.retryAfter.Store(0)
	err := o.exp.Export(ctx, o.grab.recs)
	code := o.status.last.Load()
	switch {
	case err != nil && code >= 200 && code <= 299:
		// The receiver took the request; what it rejected it would
		// reject again.
		o.log.Warn("otlp partial success: the receiver rejected some of the batch's audit records (its log records); those are not sent again, as OTLP asks",
			"endpoint", o.endpoint, "from", recs[0].Position, "to", recs[len(recs)-1].Position, "err", err)
		return nil
	case err != nil && o.status.retryAfter.Load() > 0: // 429 or 503 with a Retry-After: the receiver asks for a pause
		return &httpretry.Error{After: time.Duration(o.status.retryAfter.Load()), Err: err}
	}
	return err
}

// statusTransport keeps the status code of the last response it carried,
// and its Retry-After when it is 429 or 503.
type statusTransport struct {
	http.RoundTripper
	last       atomic.Int32
	retryAfter atomic.Int64 // a time.Duration; 0: none
}

func (t *statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		t.last.Store(int32(resp.StatusCode))
		t.retryAfter.Store(int64(httpretry.After(resp, time.Now())))
	}
	return resp, err
}

// severity maps an outcome to a log severity: the held outcomes warn.
func severity(outcome string) otellog.Severity {
	switch outcome {
	case "conflict", "quarantined", "malformed":
		return otellog.SeverityWarn
	}
	return otellog.SeverityInfo
}

func keyHex(k engine.Hash) string {
	if k.IsZero() {
		return ""
	}
	return k.String()
}

// Close shuts the exporter down.
func (o *OTLP) Close(ctx context.Context) error {
	_ = o.prov.Shutdown(ctx)
	err := o.exp.Shutdown(ctx)
	o.tr.CloseIdleConnections()
	return err
}

// grabber is a log processor that keeps a copy of every record emitted,
// for Export to send. It is used by one goroutine at a time.
type grabber struct{ recs []sdklog.Record }

func (g *grabber) OnEmit(_ context.Context, r *sdklog.Record) error {
	g.recs = append(g.recs, r.Clone())
	return nil
}
func (g *grabber) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (g *grabber) Shutdown(context.Context) error                         { return nil }
func (g *grabber) ForceFlush(context.Context) error                       { return nil }
