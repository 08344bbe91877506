package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// newExplainingFixture is newFixture serving /api/v1/explain as `run`
// wires it: report.Lineages over the fixture store's audit log, ErrNoLineage
// for an entity no record changed. opts adjust the engine's options.
func newExplainingFixture(t *testing.T, cfg Config, opts ...func(*engine.Options)) *fixture {
	t.Helper()
	f := newFixture(t, cfg, opts...)
	deps := f.srv.deps
	deps.Explain = func(ctx context.Context, q ExplainQuery) (any, error) {
		ls, err := report.Lineages(report.Records(ctx, f.store, nil),
			report.LineageOptions{Entities: []string{q.Entity}, Field: q.Field, At: q.At})
		if err != nil {
			return nil, err
		}
		if len(ls[0].Changes) == 0 {
			return nil, fmt.Errorf("%w: no decision changed entity %q in the %d audit records read",
				ErrNoLineage, q.Entity, ls[0].Read.Records)
		}
		return ls[0], nil
	}
	f.http.Close()
	f.srv = New(f.srv.cfg, deps)
	f.http = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.http.Close)
	return f
}

// steppedClock is an engine clock that reads the time set last.
func steppedClock(at *atomic.Int64) func(*engine.Options) {
	return func(o *engine.Options) {
		o.Now = func() time.Time { return time.Unix(0, at.Load()).UTC() }
	}
}

// effectText is a change's effects as `replayguard explain` prints them,
// without the lost mark.
func effectText(c report.Change) string {
	var parts []string
	for _, e := range c.Effects {
		parts = append(parts, fmt.Sprintf("%s %s %s -> %s", e.Field, e.Op, e.Value, e.After))
	}
	return strings.Join(parts, "; ")
}

func TestExplainServesAnEntitysLineage(t *testing.T) {
	var at atomic.Int64
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	at.Store(t0.UnixNano())
	f := newExplainingFixture(t, Config{}, steppedClock(&at))
	f.process(incident(1, "7", 2, "enroute"))
	at.Store(t0.Add(time.Minute).UnixNano())
	f.process(incident(2, "7", 1, "on_scene"), incident(1, "12", 4, "on_scene"))
	at.Store(t0.Add(2 * time.Minute).UnixNano())
	replay := f.process(incident(2, "7", 1, "on_scene"))[0] // suppressed
	conflict := f.process(incident(2, "7", 9, "on_scene"))[0]
	if replay.Outcome != engine.Duplicate || conflict.Outcome != engine.Conflict {
		t.Fatalf("replay %s, conflict %s: want duplicate and conflict", replay.Outcome, conflict.Outcome)
	}
	if _, err := f.eng.Discard(context.Background(), conflict.Position, "casualty count corrected by phone", "duty officer"); err != nil {
		t.Fatal(err)
	}

	t.Run("every change of the entity, with the replays and held deliveries of its keys", func(t *testing.T) {
		var l report.Lineage
		f.get("/api/v1/explain/incident/7").want(t, http.StatusOK, &l)
		if l.Entity != "incident/7" || len(l.Changes) != 2 {
			t.Fatalf("lineage of %q with %d changes, want incident/7 with 2: %+v", l.Entity, len(l.Changes), l)
		}
		if got := effectText(l.Changes[0]) + " | " + effectText(l.Changes[1]); got != "casualties add 2 -> 2 | casualties add 1 -> 3" {
			t.Fatalf("effects %s", got)
		}
		first, second := l.Changes[0], l.Changes[1]
		if len(first.Suppressed) != 0 || len(second.Suppressed) != 1 || second.Suppressed[0].Position != replay.Position {
			t.Fatalf("suppressed %+v and %+v: want the replay #%d under the second change", first.Suppressed, second.Suppressed, replay.Position)
		}
		if len(second.Held) == 0 || second.Held[0].Outcome != "conflict" || second.Held[0].Position != conflict.Position {
			t.Fatalf("held %+v: want the conflict #%d first", second.Held, conflict.Position)
		}
		if second.Route != "incidents" || second.Sequence == nil || *second.Sequence != 2 || strings.Join(second.Source, "/") != "fire/e7" {
			t.Fatalf("second change %+v", second)
		}
		if got := string(l.State["casualties"]); got != "3" || l.Suppressed != 1 {
			t.Fatalf("state casualties %s, %d suppressed; want 3 and 1", got, l.Suppressed)
		}
	})
	t.Run("an escaped name is the same entity", func(t *testing.T) {
		plain, escaped := f.get("/api/v1/explain/incident/7"), f.get("/api/v1/explain/incident%2F7")
		escaped.want(t, http.StatusOK, nil)
		if string(plain.body) != string(escaped.body) {
			t.Fatalf("escaped name answers\n%s\nwant\n%s", escaped.body, plain.body)
		}
	})
	t.Run("a field keeps that field's changes", func(t *testing.T) {
		var l report.Lineage
		f.get("/api/v1/explain/unit/e7?field=status").want(t, http.StatusOK, &l)
		if l.Field != "status" || len(l.Changes) != 2 || string(l.State["status"]) != `"on_scene"` {
			t.Fatalf("unit/e7 status lineage %+v", l)
		}
		f.get("/api/v1/explain/incident/7?field=status").want(t, http.StatusNotFound, nil)
	})
	t.Run("at in the past leaves later changes out", func(t *testing.T) {
		var l report.Lineage
		f.get("/api/v1/explain/incident/7?at="+t0.Add(30*time.Second).Format(time.RFC3339)).want(t, http.StatusOK, &l)
		if len(l.Changes) != 1 || string(l.State["casualties"]) != "2" || l.At == nil || !l.At.Equal(t0.Add(30*time.Second)) {
			t.Fatalf("lineage at t0+30s: %d changes, state %s, at %v; want 1, casualties 2", len(l.Changes), l.State, l.At)
		}
		r := f.get("/api/v1/explain/incident/7?at=" + t0.Add(-time.Hour).Format(time.RFC3339))
		r.want(t, http.StatusNotFound, nil)
	})
	t.Run("a bad at is a 400 that says what it wants", func(t *testing.T) {
		r := f.get("/api/v1/explain/incident/7?at=yesterday")
		r.want(t, http.StatusBadRequest, nil)
		if !strings.Contains(string(r.body), "RFC 3339") {
			t.Fatalf("bad at answered %s", r.body)
		}
	})
	t.Run("an entity no decision changed is a 404 that says so", func(t *testing.T) {
		r := f.get("/api/v1/explain/incident/99")
		r.want(t, http.StatusNotFound, nil)
		if !strings.Contains(string(r.body), `no decision changed entity \"incident/99\"`) {
			t.Fatalf("unknown entity answered %s", r.body)
		}
	})
	t.Run("no entity named is a 400", func(t *testing.T) {
		f.get("/api/v1/explain/").want(t, http.StatusBadRequest, nil)
	})
	t.Run("only GET", func(t *testing.T) {
		f.post("/api/v1/explain/incident/7", "{}").want(t, http.StatusMethodNotAllowed, nil)
	})
}

func TestExplainIsAbsentWithoutDepsExplain(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(incident(1, "7", 2, "enroute"))
	r := f.get("/api/v1/explain/incident/7")
	r.want(t, http.StatusNotFound, nil)
	if !strings.Contains(string(r.body), "does not explain") {
		t.Fatalf("nil Explain answered %s", r.body)
	}
}

func TestExplainNeedsATokenWhenReadsDo(t *testing.T) {
	f := newExplainingFixture(t, Config{Token: "s3cret", AuthReads: true})
	f.process(incident(1, "7", 2, "enroute"))
	f.get("/api/v1/explain/incident/7").want(t, http.StatusUnauthorized, nil)
	f.get("/api/v1/explain/incident/7", "Authorization", "Bearer s3cret").want(t, http.StatusOK, nil)
}
