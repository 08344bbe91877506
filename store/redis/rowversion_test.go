package redis

import (
	"slices"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// testRowRaceUnlocked has b update a's row between a's read and a's
// write while a's row lock is gone, and puts a's lock back before a
// writes: the lock check passes, and only the version b's write gave the
// row makes a decide again.
func testRowRaceUnlocked(t *testing.T, g *group) {
	a, b := g.must(t, "a"), g.must(t, "b")
	ent := func(v string) engine.EntityState {
		return engine.EntityState{Name: "meter/m1", Fields: engine.Fields{{Name: "kwh", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: v}}}}
	}
	r := &engine.Reads{Entities: []string{"meter/m1"}}
	lock := a.k.entityLock("meter/m1")
	var seen []string
	calls, err := update(t.Context(), a, r, func(rows *engine.Rows) (*engine.Batch, error) {
		was := "0"
		if len(rows.Entities) == 1 {
			was = rows.Entities[0].Fields.Get("kwh").Num
		}
		seen = append(seen, was)
		if len(seen) == 1 {
			updateWhileUnlocked(t, g, b, lock, r, ent("5"))
		}
		batch := batchAfter(t, a, 1)
		batch.Entities = []engine.EntityState{ent(was + "+1")}
		return batch, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || !slices.Equal(seen, []string{"0", "5"}) {
		t.Fatalf("decide saw %v in %d calls, want [0 5] in 2", seen, calls)
	}
}

// updateWhileUnlocked deletes lock, has s write e in an Update of r, and
// puts the lock's token back.
func updateWhileUnlocked(t *testing.T, g *group, s *Store, lock string, r *engine.Reads, e engine.EntityState) {
	t.Helper()
	token, err := g.srv.Do("GET", lock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.Do("DEL", lock); err != nil {
		t.Fatal(err)
	}
	if _, err := update(t.Context(), s, r, func(*engine.Rows) (*engine.Batch, error) {
		batch := batchAfter(t, s, 1)
		batch.Entities = []engine.EntityState{e}
		return batch, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.Do("SET", lock, token.(string), "PX", "60000"); err != nil {
		t.Fatal(err)
	}
}
