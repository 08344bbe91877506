package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAnotherMemberDrainsADeadMembersOutbox: member m1 commits forward
// entries its webhook never takes, then dies; once its claim expires, m2's
// drainer claims m1's outbox, delivers every entry and lets the claim go.
func TestAnotherMemberDrainsADeadMembersOutbox(t *testing.T) {
	var up atomic.Bool
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer srv.Close()
	g := memory.NewGroup(time.Hour, 1000)
	g.SetClaimTTL(300 * time.Millisecond)
	route := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
		Sequence: "sequence", Epoch: "boot_id", Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Webhook: srv.URL}}}}
	ctx := context.Background()

	member := func(id string) (*memory.Member, *forward.Drainer, *engine.Engine, func()) {
		m, err := g.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		wh, _ := forward.NewWebhook(forward.WebhookOptions{})
		d, err := forward.New(forward.Options{Store: m, Member: id, Claimer: m, Logger: testLogger(t),
			Outputs: map[string]forward.Output{engine.OutputWebhook: wh}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{route}, Observer: d, Admit: d.Admit})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); d.Run(rctx, eng) }()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done; d.Close(); eng.Close() }) }
		t.Cleanup(stop)
		return m, d, eng, stop
	}
	m1, _, eng1, stop1 := member("m1")
	var keys []string
	for seq := 1; seq <= 10; seq++ {
		decs, err := eng1.Process(ctx, []engine.Message{incident("e1", seq)})
		if err != nil || decs[0].Outcome != engine.Applied {
			t.Fatalf("decide %d: %v %v", seq, decs, err)
		}
		keys = append(keys, decs[0].Key.String())
	}
	stop1()
	m1.Kill() // its claim on its outbox is left to expire
	up.Store(true)

	m2, d2, _, _ := member("m2")
	waitFor(t, "m2 drains m1's outbox", func() bool { n, _ := m2.OutboxDepth(ctx, "m1"); return n == 0 })
	mu.Lock()
	for _, k := range keys {
		if got[k] == 0 {
			t.Fatalf("key %s of m1 never delivered", k)
		}
	}
	if len(got) != len(keys) {
		t.Fatalf("%d keys delivered, want %d", len(got), len(keys))
	}
	mu.Unlock()
	waitFor(t, "m2 stops draining m1 once its outbox is empty", func() bool {
		for _, o := range d2.Status().Outputs {
			if o.Member == "m1" {
				return false
			}
		}
		return true
	})
}

// failingClaims is a member's claimer whose claims fail while fail is set,
// and do not answer until their context ends while hang is (a store that
// does not answer); as a store, its held entries do not answer until their
// context ends while heldHangs is (a connection of its pool that hangs
// while the lanes' reads go on through others).
type failingClaims struct {
	*memory.Member
	fail, hang, heldHangs atomic.Bool
}

func (f *failingClaims) OutboxHeld(ctx context.Context) ([]engine.HeldEntry, error) {
	if f.heldHangs.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.Member.OutboxHeld(ctx)
}

func (f *failingClaims) ClaimOutboxes(ctx context.Context) ([]string, error) {
	switch {
	case f.fail.Load():
		return nil, context.DeadlineExceeded
	case f.hang.Load():
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.Member.ClaimOutboxes(ctx)
}

// TestADrainerWhoseClaimsLapseStopsDraining: claims that cannot be renewed
// stand a while, then the drainer stops its lanes before another process
// may claim the outboxes, and drains again once they are renewed.
func TestADrainerWhoseClaimsLapseStopsDraining(t *testing.T) {
	g := memory.NewGroup(time.Hour, 1000)
	g.SetClaimTTL(300 * time.Millisecond)
	m, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := &failingClaims{Member: m}
	d, cancel, done := runDrainer(t, forward.Options{Store: m, Claimer: c})
	defer func() { cancel(); <-done }()
	draining := func() bool { return len(d.Status().Outputs) > 0 }
	waitFor(t, "the drainer drains its member's outbox", draining)
	c.fail.Store(true)
	waitFor(t, "the drainer stops once its claims lapse", func() bool { return !draining() })
	c.fail.Store(false)
	waitFor(t, "the drainer drains again once its claims are renewed", draining)
	c.hang.Store(true)
	waitFor(t, "the drainer stops once its claims lapse, the store not answering", func() bool { return !draining() })
	c.hang.Store(false)
	waitFor(t, "the drainer drains again once the store answers", draining)
}

// stuckRelease hands over another member's outbox, m2, once, and its
// ReleaseOutbox does not answer until its context ends.
type stuckRelease struct {
	*memory.Member
	asked atomic.Int32
}

func (s *stuckRelease) ClaimOutboxes(ctx context.Context) ([]string, error) {
	if _, err := s.Member.ClaimOutboxes(ctx); err != nil {
		return nil, err
	}
	return []string{"m1", "m2"}, nil
}

func (s *stuckRelease) OutboxDepth(ctx context.Context, member string) (int, error) {
	if member == "m2" && s.asked.Add(1) == 1 {
		return 1, nil // then drained: released
	}
	return s.Member.OutboxDepth(ctx, member)
}

func (s *stuckRelease) ReleaseOutbox(ctx context.Context, member string) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestADrainerStopsWhileAReleaseWaits: the release of a drained outbox,
// made once its lanes stopped, is bounded: Run returns after its context
// ends though the store does not answer.
func TestADrainerStopsWhileAReleaseWaits(t *testing.T) {
	m, err := memory.NewGroup(time.Hour, 1000).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := &stuckRelease{Member: m}
	d, cancel, done := runDrainer(t, forward.Options{Store: s, Claimer: s, Poll: 20 * time.Millisecond})
	waitFor(t, "m2's outbox drained and let go", func() bool { return s.asked.Load() >= 2 && len(d.Status().Outputs) == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run has not returned 30s after its context ended: a release waits on a store that does not answer")
	}
}

// runDrainer runs a drainer of member m1 under opts with a webhook output
// until cancel; done is closed once Run has returned.
func runDrainer(t *testing.T, opts forward.Options) (d *forward.Drainer, cancel func(), done chan struct{}) {
	t.Helper()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	opts.Member, opts.Logger, opts.Outputs = "m1", testLogger(t), map[string]forward.Output{engine.OutputWebhook: wh}
	d, err := forward.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { defer close(done); d.Run(ctx, nil) }()
	return d, cancel, done
}
