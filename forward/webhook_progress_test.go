package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/metrics"
)

// TestAWebhookEntryIsCountedDeliveredAsItIsAcknowledged: a webhook posts
// one entry at a time; each is counted delivered (the metric, the lane's
// status, the latency) as its 2xx comes, not when the whole page has
// been posted. While the receiver holds the fourth POST of a page of
// ten, three are counted.
func TestAWebhookEntryIsCountedDeliveredAsItIsAcknowledged(t *testing.T) {
	var posts atomic.Int64
	fourth, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) == 4 {
			close(fourth)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	wh, err := forward.NewWebhook(forward.WebhookOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewForward(reg, engine.OutputWebhook)
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL + "/dispatch"}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{Observer: m})
	ctx := context.Background()
	var batch []engine.Message
	for seq := 1; seq <= 10; seq++ {
		batch = append(batch, incident("e1", seq))
	}
	r.keys(ctx, batch...) // one page of ten, in the outbox before the drainer reads it
	r.run()

	<-fourth // the first three were answered 204 before the fourth was sent
	delivered := func() float64 { return forwardedValue(t, reg, engine.OutputWebhook, metrics.ForwardDelivered) }
	if got := delivered(); got != 3 {
		t.Fatalf("while the fourth POST waits: %v entries counted delivered, want the three acknowledged", got)
	}
	if got := r.d.Status().Outputs[0].Delivered; got != 3 {
		t.Fatalf("while the fourth POST waits: the lane's status says %d delivered, want 3", got)
	}
	close(release)
	waitFor(t, "the page is delivered", func() bool { return delivered() == 10 })
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
}

// forwardedValue is replayguard_forwarded_total{output, result}.
func forwardedValue(t *testing.T, reg *prometheus.Registry, output, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "replayguard_forwarded_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["output"] == output && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
