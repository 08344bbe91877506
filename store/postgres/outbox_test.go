package postgres_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestOutboxSurvivesServerKill kills the server with -9 after a batch
// with outbox entries committed and one entry was marked done: once it is
// back, the rest are pending, bytes exact, and the done one is gone.
func TestOutboxSurvivesServerKill(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	s := g.mustOpen("m1")
	recs := records("m1", 1, 3)
	var es []engine.OutboxEntry
	for i, r := range recs {
		es = append(es, engine.OutboxEntry{ID: engine.OutboxID(r.Position, i), Output: engine.OutputNATS, Target: "cop.meters",
			Route: r.Route, Topic: r.Topic, Source: r.Source, Key: r.Key, Sequence: -1, Time: time.Unix(1_700_000_000, 7).UTC(),
			Payload: append([]byte{0, 0xff, byte(i)}, `{"kwh":0.250}`...)})
	}
	if err := s.Commit(t.Context(), &engine.Batch{Audit: recs, Outbox: es}); err != nil {
		t.Fatal(err)
	}
	if err := s.OutboxDone(t.Context(), "m1", []uint64{es[1].ID}); err != nil {
		t.Fatal(err)
	}
	pg.Kill()
	pg.Restart()
	ro, err := g.open("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ro.Outbox(t.Context(), "m1", 0, 10)
	if err != nil {
		t.Fatalf("Outbox after the restart: %v", err)
	}
	if len(got) != 2 || got[0].ID != es[0].ID || got[1].ID != es[2].ID {
		t.Fatalf("after kill -9 of the server the outbox holds %d entries, want %d and %d", len(got), es[0].ID, es[2].ID)
	}
	for i, e := range []engine.OutboxEntry{es[0], es[2]} {
		if !bytes.Equal(got[i].Payload, e.Payload) || got[i].Key != e.Key || !got[i].Time.Equal(e.Time) {
			t.Fatalf("entry %d after the restart: %+v, want %+v", e.ID, got[i], e)
		}
	}
}
