package storetest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

func testQuarantineList(t *testing.T, s Backend) {
	var c chain
	recs := c.records(t, 9)
	q := []engine.QuarantineEntry{quarantineEntry(5, []byte("five")), quarantineEntry(2, []byte("two")), quarantineEntry(9, []byte("nine"))}
	commit(t, s, &engine.Batch{Audit: recs, Quarantine: q})
	equal(t, "quarantine", scanQuarantine(t, s), []engine.QuarantineEntry{q[1], q[0], q[2]})
	got, err := s.Quarantined(t.Context(), 5)
	if err != nil {
		t.Fatalf("Quarantined(5): %v", err)
	}
	equal(t, "Quarantined(5)", normalizeEntry(got), q[0])
}

func testQuarantineResolve(t *testing.T, s Backend) {
	var c chain
	q := []engine.QuarantineEntry{quarantineEntry(1, []byte("a")), quarantineEntry(2, []byte("b")), quarantineEntry(3, []byte("c"))}
	commit(t, s, &engine.Batch{Audit: c.records(t, 3), Quarantine: q})
	// Resolving an unknown id is not an error: a release may be retried.
	commit(t, s, &engine.Batch{Audit: c.records(t, 1), Resolved: []uint64{2, 77}})
	equal(t, "quarantine after resolving 2", scanQuarantine(t, s), []engine.QuarantineEntry{q[0], q[2]})
	if _, err := s.Quarantined(t.Context(), 2); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Quarantined(resolved id) = %v, want ErrNotFound", err)
	}
	commit(t, s, &engine.Batch{Resolved: []uint64{1, 3}})
	if got := scanQuarantine(t, s); len(got) != 0 {
		t.Errorf("quarantine still lists %d entries after resolving all", len(got))
	}
}

func testQuarantineUnknown(t *testing.T, s Backend) {
	if _, err := s.Quarantined(t.Context(), 1); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Quarantined on an empty store = %v, want ErrNotFound", err)
	}
	var c chain
	commit(t, s, &engine.Batch{Audit: c.records(t, 2), Quarantine: []engine.QuarantineEntry{quarantineEntry(2, nil)}})
	for _, id := range []uint64{0, 1, 3, 1 << 63} {
		if _, err := s.Quarantined(t.Context(), id); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Quarantined(%d) = %v, want ErrNotFound", id, err)
		}
	}
}

func testScanQuarantineStops(t *testing.T, s Backend) {
	var c chain
	commit(t, s, &engine.Batch{Audit: c.records(t, 4), Quarantine: []engine.QuarantineEntry{
		quarantineEntry(1, nil), quarantineEntry(2, nil), quarantineEntry(3, nil), quarantineEntry(4, nil),
	}})
	stop := errors.New("stop here")
	var seen []uint64
	err := s.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		seen = append(seen, q.ID)
		if q.ID == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("ScanQuarantine = %v, want the callback's error", err)
	}
	equal(t, "ids seen", seen, []uint64{1, 2})
}

func testPayloads(t *testing.T, s Backend) {
	every := make([]byte, 512)
	for i := range every {
		every[i] = byte(i) // every byte value, invalid UTF-8 included
	}
	big := make([]byte, 256<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	payloads := map[uint64][]byte{1: every, 2: {}, 3: nil, 4: big, 5: []byte(`{"payload_b64":"AA=="}`), 6: {0}}
	var c chain
	b := &engine.Batch{Audit: c.records(t, len(payloads))}
	for id, p := range payloads {
		b.Quarantine = append(b.Quarantine, quarantineEntry(id, p))
	}
	commit(t, s, b)
	for id, want := range payloads {
		got, err := s.Quarantined(t.Context(), id)
		if err != nil {
			t.Fatalf("Quarantined(%d): %v", id, err)
		}
		if !bytes.Equal(got.Payload, want) {
			t.Errorf("payload %d: got %d bytes, want %d bytes (first difference at %d)", id, len(got.Payload), len(want), firstDiff(got.Payload, want))
		}
	}
	for _, q := range scanQuarantine(t, s) {
		if !bytes.Equal(q.Payload, payloads[q.ID]) {
			t.Errorf("scanned payload %d differs from what was written", q.ID)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testCopies(t *testing.T, s Backend) {
	var c chain
	b := fullBatch(t, &c, 1)
	commit(t, s, b)
	// The expected state, from a second, independent copy of the fixture.
	fresh := fullBatch(t, &chain{}, 1)
	want := state{
		Snap: normalize(&engine.Snapshot{Keys: fresh.Keys, Sources: fresh.Sources, Entities: fresh.Entities,
			AuditHead: c.head, NextKey: fresh.NextKey}),
		Audit:      fresh.Audit,
		Quarantine: fresh.Quarantine,
	}
	equal(t, "state after commit", readState(t, s), want)

	// The caller reuses its batch.
	b.Keys[0].Key[0] ^= 0xff
	b.Sources[0].Source[0] = "changed"
	b.Sources[0].Epochs[0].Bitmap[0] = 42
	b.Sources[0].Epochs[0].Gaps[0].To = 42
	b.Sources[0].Seen[0] = "changed"
	b.Entities[0].Fields["status"] = engine.FieldValue{Str: "changed"}
	b.Audit[0].Source[0] = "changed"
	*b.Audit[0].Sequence = 42
	b.Audit[3].Gap.From = 42
	b.Quarantine[0].Payload[0] = 'X'
	equal(t, "state after the caller changed its batch", readState(t, s), want)

	// Callers change what they read.
	snap := load(t, s)
	snap.Keys[0].Ordinal = 42
	snap.Sources[0].Source[0] = "changed"
	snap.Sources[0].Epochs[0].Bitmap[0] = 42
	snap.Entities[0].Fields["status"] = engine.FieldValue{Str: "changed"}
	err := s.ScanAudit(t.Context(), 0, func(r engine.AuditRecord) error {
		r.Source[0] = "changed"
		if r.Sequence != nil {
			*r.Sequence = 42
		}
		if r.Gap != nil {
			r.Gap.To = 42
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		q.Payload[0] = 'X'
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Quarantined(t.Context(), b.Quarantine[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	q.Payload[0] = 'Y'
	equal(t, "state after the caller changed what it read", readState(t, s), want)
}

func testClosed(t *testing.T, s Backend) {
	var c chain
	commit(t, s, fullBatch(t, &c, 1))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	nop := func(engine.AuditRecord) error { return nil }
	calls := map[string]func() error{
		"Load":           func() error { _, err := s.Load(ctx); return err },
		"Commit":         func() error { return s.Commit(ctx, &engine.Batch{Audit: c.records(t, 1)}) },
		"empty Commit":   func() error { return s.Commit(ctx, &engine.Batch{}) },
		"ScanAudit":      func() error { return s.ScanAudit(ctx, 0, nop) },
		"ScanQuarantine": func() error { return s.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { return nil }) },
		"Quarantined":    func() error { _, err := s.Quarantined(ctx, 2); return err },
		"Close":          s.Close,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// testConcurrent commits while readers scan; run it under -race.
func testConcurrent(t *testing.T, s Backend) {
	const batches, perBatch = 30, 20
	var c chain
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := range batches {
			recs := c.records(t, perBatch)
			b := &engine.Batch{
				Audit:      recs,
				Keys:       keyEntries(uint64(i*perBatch+1), uint64((i+1)*perBatch)),
				NextKey:    uint64((i+1)*perBatch + 1),
				EvictBelow: uint64(max(0, (i-5)*perBatch)),
				Sources:    []engine.SourceState{sourceState("r", []string{"a"}, int64(i))},
				Entities:   []engine.EntityState{entityState("e", int64(i))},
				Quarantine: []engine.QuarantineEntry{quarantineEntry(recs[0].Position, []byte("q")), quarantineEntry(recs[1].Position, nil)},
			}
			if i > 0 {
				b.Resolved = []uint64{recs[0].Position - perBatch}
			}
			if err := s.Commit(t.Context(), b); err != nil {
				t.Errorf("Commit %d: %v", i, err)
				return
			}
		}
	})
	for range 3 {
		wg.Go(func() { readWhileCommitting(t, s, done) })
	}
	wg.Wait()
	if got := len(scanAudit(t, s, 0)); got != batches*perBatch {
		t.Errorf("%d records after the concurrent commits, want %d", got, batches*perBatch)
	}
}

func readWhileCommitting(t *testing.T, s Backend, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		next := uint64(1)
		err := s.ScanAudit(t.Context(), 0, func(r engine.AuditRecord) error {
			if r.Position != next {
				t.Errorf("ScanAudit yielded position %d, want %d", r.Position, next)
			}
			next++
			return nil
		})
		var last uint64
		err = errors.Join(err, s.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
			if q.ID <= last {
				t.Errorf("ScanQuarantine yielded id %d after %d", q.ID, last)
			}
			last = q.ID
			return nil
		}))
		if _, qerr := s.Quarantined(t.Context(), last); qerr != nil && !errors.Is(qerr, engine.ErrNotFound) {
			err = errors.Join(err, qerr)
		}
		snap, lerr := s.Load(t.Context())
		err = errors.Join(err, lerr)
		if err != nil {
			t.Errorf("reading while committing: %v", err)
			return
		}
		for i := 1; i < len(snap.Keys); i++ {
			if snap.Keys[i].Ordinal <= snap.Keys[i-1].Ordinal {
				t.Errorf("Load returned key %d after %d", snap.Keys[i].Ordinal, snap.Keys[i-1].Ordinal)
				return
			}
		}
	}
}
