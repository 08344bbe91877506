package forward_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is an engine over a memory store with one sequenced route whose
// effect is forward, and a drainer over the same store.
type rig struct {
	t     *testing.T
	store *memory.Store
	eng   *engine.Engine
	d     *forward.Drainer
	stop  func()
}

func newRig(t *testing.T, fwd engine.ForwardSpec, outputs map[string]forward.Output, opts forward.Options) *rig {
	t.Helper()
	return newRigWith(t, fwd, outputs, opts, func(s *memory.Store) engine.OutboxStore { return s })
}

// newRigWith is newRig with the drainer reading the store through what
// wrap returns.
func newRigWith(t *testing.T, fwd engine.ForwardSpec, outputs map[string]forward.Output, opts forward.Options,
	wrap func(*memory.Store) engine.OutboxStore) *rig {
	t.Helper()
	r := &rig{t: t, store: memory.New()}
	opts.Store, opts.Outputs = wrap(r.store), outputs
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	d, err := forward.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	route := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
		Sequence: "sequence", Epoch: "boot_id", Effects: []engine.EffectSpec{{Forward: &fwd}}}
	r.eng, err = engine.New(context.Background(), r.store, engine.Options{Routes: []engine.Route{route},
		SequenceSpan: 64, Observer: d, Admit: d.Admit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.eng.Close() })
	return r
}

// run starts the drainer; stop (also at cleanup) stops it and closes the
// outputs.
func (r *rig) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.d.Run(ctx, r.eng)
	}()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			r.d.Close()
		})
	}
	r.t.Cleanup(r.stop)
}

// incident is update seq of engine src.
func incident(src string, seq int) engine.Message {
	return engine.Message{Topic: "incidents/fd/" + src,
		Payload: fmt.Appendf(nil, `{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"casualty_delta":1}`, src, seq)}
}

// process decides msgs in one batch and returns their outcomes.
func (r *rig) process(ctx context.Context, msgs ...engine.Message) []engine.Outcome {
	r.t.Helper()
	decs, err := r.eng.Process(ctx, msgs)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make([]engine.Outcome, len(decs))
	for i, d := range decs {
		out[i] = d.Outcome
	}
	return out
}

// keys decides msgs in one batch, requires each applied, and returns their
// keys.
func (r *rig) keys(ctx context.Context, msgs ...engine.Message) []string {
	r.t.Helper()
	decs, err := r.eng.Process(ctx, msgs)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make([]string, len(decs))
	for i, d := range decs {
		if d.Outcome != engine.Applied {
			r.t.Fatalf("message %d: %v, want applied", i, d.Outcome)
		}
		out[i] = d.Key.String()
	}
	return out
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// refusingReceiver is a webhook receiver that answers 503 to the update of
// sequence refused, for ever, and takes every other; delivered lists the
// sequences it took, in order.
func refusingReceiver(t *testing.T, refused string) (srv *httptest.Server, delivered func() string) {
	var mu sync.Mutex
	var got []string
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seq := r.Header.Get("Replayguard-Sequence")
		if seq == refused {
			http.Error(w, "dispatch is busy", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got = append(got, seq)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(got, ",")
	}
}
