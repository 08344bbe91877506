package redis

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// oldEntries commits, as a build from before the held index wrote them,
// entries without a member of it: two of one key and content, one without
// a key, and one whose key and content an indexed entry (the last, of
// this build) holds already. It returns them, the indexed one last.
func oldEntries(t *testing.T, s *Store) []engine.QuarantineEntry {
	t.Helper()
	k, k2 := hashOf("k"), hashOf("k2")
	qs := []engine.QuarantineEntry{
		{Topic: "plant/m1/energy", Key: k.String(), Payload: []byte(`{"msgId":"r-1","kwh":5}`)},
		{Topic: "plant/m1/energy", Key: k.String(), Payload: []byte(`{"msgId":"r-1","kwh":5}`)},
		{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":`)},
		{Topic: "plant/Zürich/énergie", Key: k2.String(), Payload: []byte{0, 0xff}},
		{Topic: "plant/Zürich/énergie", Key: k2.String(), Payload: []byte{0, 0xff}},
	}
	for i := range qs {
		qs[i].ID, qs[i].Outcome = s.QuarantineBase()+uint64(i)+1, "conflict"
	}
	qs[4].Content = engine.HeldContent(qs[4].Topic, qs[4].Payload)
	if err := s.Commit(t.Context(), &engine.Batch{Quarantine: qs}); err != nil {
		t.Fatal(err)
	}
	return qs
}

// testHeldBackfilled: a member raising a schema of version 8 indexes the
// open entries held without a member of the index: the lowest id of a key
// and content, unless an open entry of it is indexed already.
func testHeldBackfilled(t *testing.T, g *group) {
	s := g.must(t, "m1")
	qs := oldEntries(t, s)
	s.Close()
	g.do(t, "SET", g.prefix+"schema", "8")
	s = g.must(t, "m1")
	for _, c := range []struct {
		q    engine.QuarantineEntry
		want uint64
	}{{qs[0], qs[0].ID}, {qs[3], qs[4].ID}} {
		k, _ := engine.ParseHash(c.q.Key)
		if id, found, err := s.FindHeld(t.Context(), k, engine.HeldContent(c.q.Topic, c.q.Payload)); err != nil || !found || id != c.want {
			t.Errorf("FindHeld of entry #%d's message: #%d, %v, %v; want #%d", c.q.ID, id, found, err, c.want)
		}
	}
	var by []string
	for _, id := range g.do(t, "HKEYS", g.prefix+"quarantine:heldby").([]any) {
		by = append(by, id.(string))
	}
	slices.Sort(by)
	if want := []string{quarantineID(qs[0].ID), quarantineID(qs[4].ID)}; !slices.Equal(by, want) {
		t.Errorf("indexed entries %v, want %v", by, want)
	}
	if n := g.do(t, "ZCARD", g.prefix+"quarantine:held"); n != int64(2) {
		t.Errorf("%v members of the index, want 2", n)
	}
}

// holdConflict has e apply a reading and hold a conflicting one; it
// returns the conflict and its decision.
func holdConflict(t *testing.T, e *engine.Engine) (engine.Message, engine.Decision) {
	t.Helper()
	msgs := []engine.Message{meterMsg(1, "r-1"), {Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":5}`)}}
	ds, err := e.Process(t.Context(), msgs)
	if err != nil || ds[1].Outcome != engine.Conflict || ds[1].Held == 0 {
		t.Fatalf("the second reading: %+v, %v; want a conflict held", ds, err)
	}
	return msgs[1], ds[1]
}

// testHeldBackfilledFound: an entry held before the index, delivered again
// after a member raised the schema, is a duplicate of it: one entry.
func testHeldBackfilledFound(t *testing.T, g *group) {
	s := g.must(t, "m1")
	e := newEngine(t, s)
	conflict, held := holdConflict(t, e)
	e.Close()
	s.Close()
	g.do(t, "DEL", g.prefix+"quarantine:held", g.prefix+"quarantine:heldby") // as a build from before held it
	g.do(t, "SET", g.prefix+"schema", "8")
	e = newEngine(t, g.must(t, "m1"))
	again, err := e.Process(t.Context(), []engine.Message{conflict})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("delivered again: held in quarantine as #%d,", held.Held)
	if again[0].Outcome != engine.Duplicate || !strings.HasPrefix(again[0].Reason, want) {
		t.Errorf("the conflict delivered again after the raise: %s (%s), want a duplicate naming #%d", again[0].Outcome, again[0].Reason, held.Held)
	}
	if n := g.do(t, "HLEN", g.prefix+"quarantine"); n != int64(1) {
		t.Errorf("%v quarantine entries, want 1", n)
	}
}

// testHeldBackfillPassesOverAnUnreadableEntry: an entry a member raising
// version 8 cannot decode is left unindexed, and the store opens.
func testHeldBackfillPassesOverAnUnreadableEntry(t *testing.T, g *group) {
	s := g.must(t, "m1")
	oldEntries(t, s)
	s.Close()
	id := quarantineID(0xffff)
	g.do(t, "HSET", g.prefix+"quarantine", id, "not an entry")
	g.do(t, "ZADD", g.prefix+"quarantine:ids", "0", id)
	g.do(t, "SET", g.prefix+"schema", "8")
	s, err := g.open(t, "m1")
	if err != nil {
		t.Fatalf("a store holding an entry the raise cannot read: %v", err)
	}
	s.Close()
}
