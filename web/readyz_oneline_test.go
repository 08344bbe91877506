package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/replayguard/replayguard/store/memory"
)

// TestReadyzSaysADriversErrorOnOneLine: pgx's errors break their line
// ("failed to connect to …:\n\tdial error"); /readyz, read by a probe or a
// person, gives it on one line.
func TestReadyzSaysADriversErrorOnOneLine(t *testing.T) {
	m, eng := groupMember(t, memory.NewGroup(0, 0))
	status := func() StoreStatus {
		return StoreStatus{Error: "postgres store: failed to connect to `user=rg database=ops`:\n\t127.0.0.1:5432 (127.0.0.1): dial error: connection refused",
			Warning: "a\n\tb"}
	}
	srv := New(Config{Logger: testLogger(t)}, Deps{Engine: eng, Audit: m, Quarantine: m, Store: status, Ready: func() bool { return false }})
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(h.Close)
	f := &fixture{t: t, http: h}
	r := f.get("/readyz")
	r.want(t, http.StatusServiceUnavailable, nil)
	var got struct{ Error, Warning string }
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := "not ready: postgres store: failed to connect to `user=rg database=ops`: 127.0.0.1:5432 (127.0.0.1): dial error: connection refused"
	if got.Error != want || got.Warning != "a b" {
		t.Fatalf("readyz %+v, want error %q and warning %q", got, want, "a b")
	}
}
