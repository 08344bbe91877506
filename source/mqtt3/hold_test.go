package mqtt3

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A hold that begins while the consumer waits before reconnecting (its
// last connection a flap) keeps it off the brokers: the hold is asked as
// the round of connections starts, after the wait, not only before it. A
// member whose lease ran out meanwhile must not take its session back from
// the live member that adopts it.
func TestAHoldBegunDuringTheReconnectWaitKeepsTheConsumerOff(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	p := startProxy(t, b.URL()[len("tcp://"):])
	cfg := testConfig(t, p.URL())
	cfg.ConnectRetryMin, cfg.ConnectRetryMax = 3*time.Second, 3*time.Second // the wait after a flap: 1.5 s to 3 s
	waiting := make(chan struct{}, 16)
	cfg.Logger = slog.New(&noting{Handler: cfg.Logger.Handler(), msg: "mqtt waiting before reconnecting", seen: waiting})
	var held atomic.Bool
	cfg.Hold = func() string {
		if held.Load() {
			return "the lease ran out"
		}
		return ""
	}
	r := start(t, cfg, newRecorder(t))
	r.waitReady(t)
	p.Cut() // a short connection that delivered nothing: a flap, so a wait before the next round
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the consumer did not wait before reconnecting")
	}
	held.Store(true)
	time.Sleep(4 * time.Second) // past the longest wait
	if n := len(p.Conns()); n != 1 {
		t.Fatalf("the consumer made %d connections, want 1: it connected again while held", n)
	}
	held.Store(false)
	r.waitReady(t)
}

// noting passes records on to Handler, and signals seen at each whose
// message is msg.
type noting struct {
	slog.Handler
	msg  string
	seen chan<- struct{}
}

func (h *noting) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.seen <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *noting) WithAttrs(as []slog.Attr) slog.Handler {
	return &noting{Handler: h.Handler.WithAttrs(as), msg: h.msg, seen: h.seen}
}

func (h *noting) WithGroup(name string) slog.Handler {
	return &noting{Handler: h.Handler.WithGroup(name), msg: h.msg, seen: h.seen}
}
