package redis

import (
	"bytes"
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestOutboxSurvivesServerKill kills the server with -9 after an engine
// forwarded messages and one entry was marked done: once it is back, the
// others are pending, bytes exact, the done one is gone, and the engine
// goes on writing entries.
func TestOutboxSurvivesServerKill(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	s := g.must(t, "a")
	route := meters
	route.Effects = []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{topic}"}}}
	e, err := engine.New(context.Background(), s, engine.Options{Routes: []engine.Route{route}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	msgs := []engine.Message{meterMsg(1, "x1"), meterMsg(2, "x2"), meterMsg(3, "x3")}
	msgs[1].Payload = append(msgs[1].Payload, " \t"...)
	ds, err := e.Process(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.OutboxDone(t.Context(), "a", []uint64{engine.OutboxID(ds[0].Position, 0)}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	again := g.must(t, "")
	got, err := again.Outbox(t.Context(), "a", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != engine.OutboxID(ds[1].Position, 0) || got[1].ID != engine.OutboxID(ds[2].Position, 0) {
		t.Fatalf("after kill -9 of the server the outbox holds %+v", got)
	}
	for i, m := range msgs[1:] {
		if !bytes.Equal(got[i].Payload, m.Payload) || got[i].Target != "clean/"+m.Topic || got[i].Key != ds[i+1].Key {
			t.Fatalf("entry %d after the restart: %+v", got[i].ID, got[i])
		}
	}
	if _, err := e.Process(t.Context(), []engine.Message{meterMsg(4, "x4")}); err != nil {
		t.Fatal(err)
	}
	if n, err := again.OutboxDepth(t.Context(), "a"); err != nil || n != 3 {
		t.Fatalf("depth after a batch past the restart = %d, %v; want 3", n, err)
	}
}
