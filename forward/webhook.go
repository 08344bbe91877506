package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/httpretry"
)

// DefaultWebhookTimeout bounds one POST when WebhookOptions.Timeout is 0.
const DefaultWebhookTimeout = 10 * time.Second

// bodyExcerpt is how much of a refusing response's body the held entry's
// reason keeps.
const bodyExcerpt = 256

// WebhookOptions configure NewWebhook.
type WebhookOptions struct {
	// Timeout bounds one POST, the response included. Default
	// DefaultWebhookTimeout.
	Timeout time.Duration
	// Client sends the requests. Default: a client of its own, which
	// follows no redirect (a 3xx refuses the entry: a POST redirected
	// could lose its body).
	Client *http.Client
	// TLS verifies https:// receivers and presents a client certificate,
	// for the default client. Default nil: the system roots.
	TLS *tls.Config
}

// Webhook POSTs each entry's payload to its URL (the entry's Target), one
// at a time, in order: Content-Type application/json (application/
// octet-stream for a payload that is not JSON: a Sparkplug route's
// protobuf), Idempotency-Key the
// entry's key, and the replayguard-* headers (see Properties).
//
// A 2xx acknowledges the entry. A 5xx, a timeout, a connection error, or
// a 4xx that is not the entry's (401, 407, 408, 409, 425, 429:
// endpointStatus) fails the attempt: the drainer backs off and sends it
// again, after the Retry-After of a 429 or 503 when its backoff is
// shorter (up to httpretry.Max). Any other status (400, 403, 404, 413, 422...) refuses the entry
// for good (a *RefusedError with the status and the start of the body): it is
// held for an operator.
type Webhook struct {
	client  *http.Client
	timeout time.Duration
}

// NewWebhook returns a webhook output.
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative webhook timeout", ErrConfig)
	}
	setDefault(&opts.Timeout, DefaultWebhookTimeout)
	c := opts.Client
	if c == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = opts.TLS
		c = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Webhook{client: c, timeout: opts.Timeout}, nil
}

// Deliver implements Output.
func (w *Webhook) Deliver(ctx context.Context, entries []engine.OutboxEntry) (int, error) {
	return w.deliverEach(ctx, entries, nil)
}

// deliverEach is Deliver, calling acked(i), when not nil, as soon as the
// receiver has acknowledged entries[i]: the drainer counts each entry
// delivered then, not once the whole page is posted.
func (w *Webhook) deliverEach(ctx context.Context, entries []engine.OutboxEntry, acked func(i int)) (int, error) {
	for i, e := range entries {
		if err := w.post(ctx, e); err != nil {
			var ref *RefusedError
			if errors.As(err, &ref) {
				ref.Index = i
			}
			return i, err
		}
		if acked != nil {
			acked(i)
		}
	}
	return len(entries), nil
}

// contentType is a copy's Content-Type: a JSON route's payloads are JSON
// (the engine checked them), a Sparkplug route's are protobuf.
func contentType(payload []byte) string {
	if json.Valid(payload) {
		return "application/json"
	}
	return "application/octet-stream"
}

func (w *Webhook) post(ctx context.Context, e engine.OutboxEntry) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Target, bytes.NewReader(e.Payload))
	if err != nil {
		return &RefusedError{Reason: fmt.Sprintf("cannot POST to %q: %v", e.Target, err)}
	}
	req.Header.Set("Content-Type", contentType(e.Payload))
	req.Header.Set("Idempotency-Key", e.Key.String())
	for _, p := range Properties(e) {
		req.Header.Set(p.Name, p.Value)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("POST %s: no answer within %s (outputs.webhook.timeout)", engine.RedactTarget(engine.OutputWebhook, e.Target), w.timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it names the URL again, with a user's token
		}
		if speaksNoTLS(err) {
			return fmt.Errorf("POST %s: the server does not speak TLS: the webhook output's URL is https://, the server answers in plain HTTP (its URL would be http://): %w",
				engine.RedactTarget(engine.OutputWebhook, e.Target), err)
		}
		return fmt.Errorf("POST %s: %w", engine.RedactTarget(engine.OutputWebhook, e.Target), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, bodyExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c >= 500 || endpointStatus[c]:
		err := fmt.Errorf("POST %s: %s%s", engine.RedactTarget(engine.OutputWebhook, e.Target), resp.Status, excerpt(body))
		return httpretry.Wrap(err, resp, time.Now())
	default:
		return &RefusedError{Reason: fmt.Sprintf("HTTP %s%s%s", resp.Status, redirectedTo(resp), excerpt(body))}
	}
}

// redirectedTo says where a redirect answer points, which the webhook does
// not follow, and what to change: " to URL (…)"; "" for any other answer.
func redirectedTo(resp *http.Response) string {
	if resp.StatusCode < 300 || resp.StatusCode >= 400 {
		return ""
	}
	loc, err := resp.Location()
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" to %s (a POST is not redirected: change the forward's webhook URL for the copies to come; "+
		"this entry keeps the URL it was written with, so retry it once that URL takes it again, or drop it and send its copy to the new one by hand)",
		engine.RedactTarget(engine.OutputWebhook, loc.String()))
}

// endpointStatus are the 4xx answers that say nothing of the entry: the
// output's credentials or the receiver's timing. They fail the attempt, as
// a 5xx does, instead of holding one entry after another (out of order
// once retried). A 403 or a 404 stays the entry's: routes post to URLs of
// their own through one lane, and one route's wrong URL must not stop the
// others.
var endpointStatus = map[int]bool{
	http.StatusUnauthorized:      true, // 401
	http.StatusProxyAuthRequired: true, // 407
	http.StatusRequestTimeout:    true, // 408
	http.StatusConflict:          true, // 409: the same Idempotency-Key still being processed
	http.StatusTooEarly:          true, // 425
	http.StatusTooManyRequests:   true, // 429
}

// excerpt renders the start of a response body for a reason: ": text",
// valid UTF-8, on one line.
func excerpt(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return ""
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(b) >= bodyExcerpt {
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return ": " + s
}

// Close implements Output.
func (w *Webhook) Close() error {
	w.client.CloseIdleConnections()
	return nil
}

// speaksNoTLS reports whether err is a TLS handshake answered in plain
// text: by an HTTP server (net/http says so in words of its own) or by
// another.
func speaksNoTLS(err error) bool {
	var plain tls.RecordHeaderError
	return errors.As(err, &plain) || err.Error() == "http: server gave HTTP response to HTTPS client"
}
