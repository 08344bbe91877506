package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAStoreLossShowsInReadinessAndAnOperatorAcceptsIt: a member of a
// group on a store that failed over without its last commits (and no
// journal to recover them) answers 503 naming the loss, /api/v1/store/loss
// shows it, and accept-loss takes the operator's name and resumes it.
func TestAStoreLossShowsInReadinessAndAnOperatorAcceptsIt(t *testing.T) {
	ctx := context.Background()
	g := memory.NewGroup(0, 0)
	m, eng := groupMember(t, g)
	if _, err := eng.Process(ctx, []engine.Message{meter("m-1", "1")}); err != nil {
		t.Fatal(err)
	}
	replica := g.Checkpoint()
	if _, err := eng.Process(ctx, []engine.Message{meter("m-2", "2"), meter("m-3", "3")}); err != nil {
		t.Fatal(err)
	}
	g.FailOver(replica)

	status := func() StoreStatus {
		if l := eng.Loss(); l != nil {
			return StoreStatus{Error: l.Error()}
		}
		return StoreStatus{}
	}
	srv := New(Config{Logger: testLogger(t)}, Deps{Engine: eng, Audit: m, Quarantine: m, Loss: eng, Store: status,
		Ready: func() bool { return eng.Loss() == nil }})
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(h.Close)
	f := &fixture{t: t, http: h}

	var none struct{ Loss *lossReport }
	f.get("/api/v1/store/loss").want(t, http.StatusOK, &none)
	if none.Loss != nil {
		t.Fatalf("a loss before the store was checked: %+v", none.Loss)
	}
	if err := eng.CheckStore(ctx); err == nil {
		t.Fatal("CheckStore found nothing on a store that lost two records")
	}
	r := f.get("/readyz")
	r.want(t, http.StatusServiceUnavailable, nil)
	for _, want := range []string{"memory store", `member \"rg-1\"`, "positions 2..3", "accept-loss"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("readyz %s does not say %q", r.body, want)
		}
	}
	var got struct{ Loss *lossReport }
	f.get("/api/v1/store/loss").want(t, http.StatusOK, &got)
	if got.Loss == nil || got.Loss.Lost != "2..3" || got.Loss.Uncovered != "2..3" || got.Loss.Member != "rg-1" {
		t.Fatalf("store loss %+v: want positions 2..3 of rg-1, none covered", got.Loss)
	}
	f.post("/api/v1/store/accept-loss", `{}`).want(t, http.StatusBadRequest, nil)
	var acc struct {
		Accepted lossReport
		Operator string
	}
	f.post("/api/v1/store/accept-loss", `{"operator": "duty officer"}`).want(t, http.StatusOK, &acc)
	if acc.Operator != "duty officer" || acc.Accepted.Lost != "2..3" {
		t.Fatalf("accepted %+v", acc)
	}
	f.get("/readyz").want(t, http.StatusOK, nil)
	f.post("/api/v1/store/accept-loss", `{"operator": "duty officer"}`).want(t, http.StatusConflict, nil)
}

// TestStatsOnASharedStoreLeaveOutTheGroupsWindows: a member holds none of
// the group's windows, so /api/v1/stats does not say there are none.
func TestStatsOnASharedStoreLeaveOutTheGroupsWindows(t *testing.T) {
	ctx := context.Background()
	m, eng := groupMember(t, memory.NewGroup(0, 0))
	if _, err := eng.Process(ctx, []engine.Message{incident(1, "7", 1, "a"), meter("m-1", "1")}); err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(New(Config{Logger: testLogger(t)}, Deps{Engine: eng, Audit: m, Quarantine: m}).Handler())
	t.Cleanup(h.Close)
	f := &fixture{t: t, http: h}
	var st map[string]any
	f.get("/api/v1/stats").want(t, http.StatusOK, &st)
	if st["position"] != float64(2) {
		t.Errorf("stats %v: position, want 2", st)
	}
	for _, k := range []string{"keys", "sources", "entities"} {
		if v, ok := st[k]; ok {
			t.Errorf("stats %v: %s %v, of windows this member does not hold (the group has 2 sources, 2 keys, 3 entities)", st, k, v)
		}
	}
}

// groupMember opens member rg-1 of g and an engine on it.
func groupMember(t *testing.T, g *memory.Group) (*memory.Member, *engine.Engine) {
	t.Helper()
	m, err := g.Open("rg-1")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(context.Background(), m, engine.Options{Routes: testRoutes, StoreName: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return m, eng
}
