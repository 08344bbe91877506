package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// gatedCommits holds every commit until gate is closed; entered is closed
// when the first one arrives.
type gatedCommits struct {
	engine.Store
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedCommits) Commit(ctx context.Context, b *engine.Batch) error {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.Store.Commit(ctx, b)
}

// TestAReleaseWhileADiscardOfTheSameEntryCommitsSaysSo: the entry is still
// held while another operator's discard of it commits; the API must not
// answer that there is no such entry (the discard may yet fail and leave it
// held), but that another action on it is under way.
func TestAReleaseWhileADiscardOfTheSameEntryCommitsSaysSo(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	opts := engine.Options{Routes: testRoutes, SequenceSpan: 64}
	e0, err := engine.New(ctx, mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := e0.Process(ctx, []engine.Message{incident(100, "7", 1, "a"), incident(5, "7", 2, "b")})
	if err != nil || ds[1].Outcome != engine.Quarantined {
		t.Fatalf("%+v, %v", ds, err)
	}
	e0.Close()
	g := &gatedCommits{Store: mem, entered: make(chan struct{}), gate: make(chan struct{})}
	e, err := engine.New(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	h := New(Config{Listen: "127.0.0.1:9780"}, Deps{Engine: e, Audit: mem, Quarantine: mem}).Handler()
	post := func(path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Host = "127.0.0.1:9780"
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	discarded := make(chan *httptest.ResponseRecorder, 1)
	go func() { discarded <- post("/api/v1/quarantine/2/discard", `{"reason":"bench noise"}`) }()
	<-g.entered
	w := post("/api/v1/quarantine/2/release", "")
	close(g.gate)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "being released or discarded") {
		t.Errorf("release during the discard: %d %s, want 409 saying another action is under way", w.Code, w.Body)
	}
	if d := <-discarded; d.Code != http.StatusOK {
		t.Fatalf("discard: %d %s", d.Code, d.Body)
	}
}
