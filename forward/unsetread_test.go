package forward_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/store/memory"
)

// unreadableOutbox is a store whose outbox cannot be read while down, as
// a shared store's while its server is away.
type unreadableOutbox struct {
	*memory.Store
	down atomic.Bool
}

func (s *unreadableOutbox) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	if s.down.Load() {
		return nil, errors.New("connection refused")
	}
	return s.Store.Outbox(ctx, member, after, limit)
}

// TestAnOutboxItCannotReadIsNotBlamedOnOutputsNothingNames: with the
// store's outbox unreadable, readiness names the output the routes
// forward to, not the outputs that stand by for entries an earlier
// configuration left (none here).
func TestAnOutboxItCannotReadIsNotBlamedOnOutputsNothingNames(t *testing.T) {
	var st *unreadableOutbox
	outputs := map[string]forward.Output{
		engine.OutputWebhook: &countingOutput{got: map[engine.Hash]int{}},
		engine.OutputMQTT:    forward.Unconfigured("no route forwards to mqtt"),
		engine.OutputNATS:    forward.Unconfigured("no route forwards to nats"),
	}
	r := newRigWith(t, engine.ForwardSpec{Webhook: "http://downstream.invalid/"}, outputs,
		forward.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		func(s *memory.Store) engine.OutboxStore { st = &unreadableOutbox{Store: s}; return st })
	r.run()
	st.down.Store(true)
	r.keys(context.Background(), incident("e1", 1))
	var w string
	waitFor(t, "the webhook output failing on the outbox", func() bool {
		w = r.d.Status().Warning()
		return strings.Contains(w, "webhook output failing") && strings.Contains(w, "read the outbox: connection refused")
	})
	time.Sleep(100 * time.Millisecond) // several failed reads of every lane
	if w = r.d.Status().Warning(); strings.Contains(w, "mqtt") || strings.Contains(w, "nats") {
		t.Fatalf("readiness blames outputs nothing names for the outbox the store cannot read: %s", w)
	}
	for _, o := range r.d.Status().Outputs {
		if o.Output != engine.OutputWebhook {
			t.Fatalf("the status lists the %s output, which nothing names and which has no entry: %+v", o.Output, o)
		}
	}
	st.down.Store(false)
	r.keys(context.Background(), incident("e1", 2))
	waitFor(t, "the warning to clear once the outbox reads again", func() bool { return r.d.Status().Warning() == "" })
}
