package embedded

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// The codec names every field; a new field must be added to it.
func TestOutboxCodecCoversEveryField(t *testing.T) {
	const known = "ID Output Target Route Topic Source Key Epoch Sequence Time Payload"
	typ := reflect.TypeFor[engine.OutboxEntry]()
	var names []string
	for i := range typ.NumField() {
		names = append(names, typ.Field(i).Name)
	}
	if got := strings.Join(names, " "); got != known {
		t.Fatalf("engine.OutboxEntry has fields %q; appendOutboxEntry knows %q", got, known)
	}
}

func outboxSamples() []engine.OutboxEntry {
	at := time.Date(2026, 12, 2, 14, 0, 0, 123456789, time.UTC)
	return []engine.OutboxEntry{
		{ID: engine.OutboxID(7, 1), Output: engine.OutputMQTT, Target: "clean/incidents/fd", Route: "incidents", Topic: "incidents/fd",
			Source: []string{"fd", "e7"}, Key: engine.Hash{1, 2, 3}, Epoch: "boot-2", Sequence: 41, Time: at, Payload: []byte(`{"n":3}`)},
		{ID: 1 << 60, Output: engine.OutputWebhook, Target: "https://x/y?z", Route: "meters", Topic: "plant/m1/energy",
			Source: nil, Sequence: -1, Time: at.Add(-time.Hour), Payload: nil},
		{ID: 2, Output: engine.OutputNATS, Target: "clean.é", Source: []string{""}, Sequence: 1 << 62, Time: time.Unix(0, 0).UTC(), Payload: []byte{0, 0xff}},
	}
}

func TestOutboxEntriesComeBackAsTheyWent(t *testing.T) {
	for _, e := range outboxSamples() {
		got, err := decodeOutboxEntry(appendOutboxEntry(nil, &e))
		if err != nil {
			t.Fatalf("entry %d: %v", e.ID, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("entry %d came back\n%+v\nwant\n%+v", e.ID, got, e)
		}
	}
}

func TestACutOutboxEntryIsAnError(t *testing.T) {
	e := outboxSamples()[0]
	v := appendOutboxEntry(nil, &e)
	metaEnd := len(v) - len(e.Payload) // cutting the payload leaves a shorter payload, not an error
	for n := range metaEnd {
		if _, err := decodeOutboxEntry(v[:n]); err == nil {
			t.Fatalf("an entry cut to %d of %d bytes decoded", n, len(v))
		}
	}
}

// TestOutboxEntriesWrittenAsJSONAreStillRead writes pending and held
// entries as a store did before the binary meta, and checks that they are
// read, held, requeued and delivered.
func TestOutboxEntriesWrittenAsJSONAreStillRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	samples := outboxSamples()
	err = s.db.Update(func(tx *bolt.Tx) error {
		ob, err := tx.CreateBucketIfNotExists(bucketOutbox)
		if err != nil {
			return err
		}
		for _, e := range samples {
			payload := e.Payload
			e.Payload = nil
			v, err := appendOutboxValue(nil, e, payload)
			if err != nil {
				return err
			}
			if _, w := binary.Uvarint(v); v[w] != '{' {
				t.Fatalf("the JSON meta of entry %d does not start with '{'", e.ID)
			}
			if err := ob.Put(u64(e.ID), v); err != nil {
				return err
			}
		}
		return addDepth(tx.Bucket(bucketMeta), len(samples))
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := s.Outbox(ctx, "", 0, 10)
	if err != nil || len(got) != len(samples) {
		t.Fatalf("Outbox = %d entries, %v", len(got), err)
	}
	byID := map[uint64]engine.OutboxEntry{}
	for _, e := range samples {
		byID[e.ID] = e
	}
	for _, e := range got {
		want := byID[e.ID]
		if !e.Time.Equal(want.Time) || e.Target != want.Target || !reflect.DeepEqual(e.Source, want.Source) || string(e.Payload) != string(want.Payload) {
			t.Errorf("JSON entry %d read as %+v, want %+v", e.ID, e, want)
		}
	}
	// Hold the first (a JSON entry), requeue it: it is pending again, binary.
	id := samples[0].ID
	if err := s.Commit(ctx, &engine.Batch{OutboxHeld: []engine.OutboxHold{{ID: id, Reason: "refused"}}}); err != nil {
		t.Fatal(err)
	}
	if held, err := s.OutboxHeld(ctx); err != nil || len(held) != 1 || held[0].Target != samples[0].Target || string(held[0].Payload) != `{"n":3}` {
		t.Fatalf("held = %+v, %v", held, err)
	}
	if err := s.Commit(ctx, &engine.Batch{OutboxResolved: []engine.OutboxResolve{{ID: id, Requeue: true}}}); err != nil {
		t.Fatal(err)
	}
	again, err := s.Outbox(ctx, "", id-1, 1)
	if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0], samples[0]) {
		t.Fatalf("requeued entry = %+v, %v; want %+v", again, err, samples[0])
	}
	if err := s.OutboxDone(ctx, "", []uint64{samples[0].ID, samples[1].ID, samples[2].ID}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.OutboxDepth(ctx, ""); err != nil || n != 0 {
		t.Fatalf("depth after done = %d, %v", n, err)
	}
	s.Close()
}

// FuzzOutboxEntry checks that any bytes decode to an error or to an entry
// that encodes back to the same entry.
func FuzzOutboxEntry(f *testing.F) {
	for _, e := range outboxSamples() {
		f.Add(appendOutboxEntry(nil, &e))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := decodeOutboxEntry(v)
		if err != nil {
			return
		}
		again, err := decodeOutboxEntry(appendOutboxEntry(nil, &e))
		if err != nil {
			t.Fatalf("entry %+v re-encoded did not decode: %v", e, err)
		}
		_, off1 := e.Time.Zone()
		_, off2 := again.Time.Zone()
		if !again.Time.Equal(e.Time) || off1 != off2 {
			t.Fatalf("time %v re-encoded came back %v", e.Time, again.Time)
		}
		again.Time, e.Time = time.Time{}, time.Time{} // a zone is a new *time.Location each time
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("entry %+v re-encoded came back %+v", e, again)
		}
	})
}

// BenchmarkOutboxEntry encodes and decodes an entry as its meta is now and
// as JSON, as it was.
func BenchmarkOutboxEntry(b *testing.B) {
	e := outboxSamples()[0]
	e.Payload = make([]byte, 200)
	b.Run("binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeOutboxEntry(appendOutboxEntry(nil, &e)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			x := e
			x.Payload = nil
			v, err := appendOutboxValue(nil, x, e.Payload)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := decodeOutboxValue(v, &x); err != nil {
				b.Fatal(err)
			}
		}
	})
}
