package embedded_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// asLayout4 sets the layout of the store in dir back to 4, and with
// dropIndex drops its held index, as a build of layout 4 from before the
// index wrote the store.
func asLayout4(t *testing.T, dir string, dropIndex bool) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if dropIndex {
			if err := tx.DeleteBucket([]byte("held")); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("version"), []byte{0, 0, 0, 0, 0, 0, 0, 4})
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

var heldRoutes = []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}

// processIn opens the store in dir, has an engine decide msgs, and
// closes both.
func processIn(t *testing.T, dir string, msgs ...engine.Message) ([]engine.Decision, int) {
	t.Helper()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(t.Context(), s, engine.Options{Routes: heldRoutes})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ds, err := e.Process(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CountQuarantine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ds, n
}

// TestAnEntryHeldBeforeTheIndexIsFoundOnceTheLayoutIsRaised: an entry of
// a store of layout 4 held before the index of open entries by key and
// content is indexed when a writer raises the layout to 5: its message
// delivered again is a duplicate of it, and opens no second entry.
func TestAnEntryHeldBeforeTheIndexIsFoundOnceTheLayoutIsRaised(t *testing.T) {
	dir := t.TempDir()
	conflict := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":5}`)}
	ds, _ := processIn(t, dir, engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":1}`)}, conflict)
	if ds[1].Outcome != engine.Conflict || ds[1].Held == 0 {
		t.Fatalf("the second reading: %s (%s), want a conflict held", ds[1].Outcome, ds[1].Reason)
	}
	asLayout4(t, dir, true)
	again, n := processIn(t, dir, conflict)
	want := fmt.Sprintf("delivered again: held in quarantine as #%d,", ds[1].Held)
	if again[0].Outcome != engine.Duplicate || !strings.HasPrefix(again[0].Reason, want) {
		t.Errorf("the conflict delivered again after the raise: %s (%s), want a duplicate naming #%d", again[0].Outcome, again[0].Reason, ds[1].Held)
	}
	if n != 1 {
		t.Errorf("%d quarantine entries, want 1", n)
	}
}

// TestTheRaiseIndexesTheLowestEntryOfAMessage: of two entries held
// before the index of one key and content, the raise indexes the lower
// id; an entry whose key and content an indexed entry holds stays out,
// as does one without a key.
func TestTheRaiseIndexesTheLowestEntryOfAMessage(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	k, k2 := engine.Hash{1}, engine.Hash{2}
	qs := []engine.QuarantineEntry{ // without Content, as a build from before the index held them
		{ID: 1, Topic: "t", Key: k.String(), Payload: []byte("a")},
		{ID: 2, Topic: "t", Key: k.String(), Payload: []byte("a")},
		{ID: 3, Topic: "t", Payload: []byte("a")},
		{ID: 4, Topic: "t", Key: k2.String(), Payload: []byte("b")},
		{ID: 5, Topic: "t", Key: k2.String(), Payload: []byte("b"), Content: engine.HeldContent("t", []byte("b"))}, // indexed
	}
	if err := s.Commit(ctx, &engine.Batch{Quarantine: qs}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	asLayout4(t, dir, false)
	if s, err = embedded.Open(dir, embedded.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		key     engine.Hash
		payload string
		want    uint64
	}{{k, "a", 1}, {k2, "b", 5}} {
		if id, found, err := s.FindHeld(ctx, c.key, engine.HeldContent("t", []byte(c.payload))); err != nil || !found || id != c.want {
			t.Errorf("FindHeld of %q: #%d, %v, %v; want #%d", c.payload, id, found, err, c.want)
		}
	}
	if err := s.Commit(ctx, &engine.Batch{Resolved: []uint64{1, 5}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		key     engine.Hash
		payload string
	}{{k, "a"}, {k2, "b"}} {
		if id, found, err := s.FindHeld(ctx, p.key, engine.HeldContent("t", []byte(p.payload))); err != nil || found {
			t.Errorf("FindHeld of %q with its indexed entry resolved: #%d, %v, %v; want none: the others were left out", p.payload, id, found, err)
		}
	}
}

// TestAnEntryTheRaiseCannotReadDoesNotKeepTheStoreShut: a quarantine
// entry the raise to layout 5 cannot decode is left unindexed, and the
// store opens.
func TestAnEntryTheRaiseCannotReadDoesNotKeepTheStoreShut(t *testing.T) {
	dir := t.TempDir()
	processIn(t, dir, engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-1","kwh":1}`)})
	asLayout4(t, dir, true)
	db, err := bolt.Open(filepath.Join(dir, embedded.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("quarantine")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 9}, []byte("not an entry"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatalf("a store holding an entry the raise cannot read: %v", err)
	}
	s.Close()
}
