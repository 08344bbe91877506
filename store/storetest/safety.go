package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The cases of what a store owns: its own copies, its closing, and reads
// that run while commits land.

func testCopies(t *testing.T, s *handle) {
	c := s.chain()
	b := s.fullBatch(t, &c, 1)
	commit(t, s, b)
	// The expected state, from a second, independent copy of the fixture.
	fc := s.chain()
	fresh := s.fullBatch(t, &fc, 1)
	want := s.wantState(&engine.Snapshot{Keys: fresh.Keys, Sources: fresh.Sources, Entities: fresh.Entities,
		AuditHead: c.head, NextKey: fresh.NextKey}, fresh.Audit, fresh.Quarantine)
	equal(t, "state after commit", readState(t, s), want)

	// The caller reuses its batch.
	b.Keys[0].Key[0] ^= 0xff
	b.Sources[0].Source[0] = "changed"
	b.Sources[0].Epochs[0].Bitmap[0] = 42
	b.Sources[0].Epochs[0].Gaps[0].To = 42
	b.Sources[0].Seen[0] = "changed"
	b.Entities[0].Fields.Set("status", engine.FieldValue{Str: "changed"})
	b.Audit[0].Source[0] = "changed"
	*b.Audit[0].Sequence = 42
	b.Audit[3].Gap.From = 42
	b.Quarantine[0].Payload[0] = 'X'
	equal(t, "state after the caller changed its batch", readState(t, s), want)

	// Callers change what they read.
	snap := load(t, s)
	if s.shared() { // a group's keys are read through Update
		update(t, s, &engine.Reads{Keys: []engine.Hash{keyHash(1)}}, func(rows *engine.Rows) (*engine.Batch, error) {
			if len(rows.Keys) != 1 {
				t.Fatalf("Update read %d entries of key 1, want 1", len(rows.Keys))
			}
			rows.Keys[0].Ordinal, rows.Keys[0].Digest[0] = 42, 42
			return &engine.Batch{}, nil
		})
	} else {
		snap.Keys[0].Ordinal = 42
	}
	snap.Sources[0].Source[0] = "changed"
	snap.Sources[0].Epochs[0].Bitmap[0] = 42
	snap.Entities[0].Fields.Set("status", engine.FieldValue{Str: "changed"})
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

func testClosed(t *testing.T, s *handle) {
	c := s.chain()
	commit(t, s, s.fullBatch(t, &c, 1))
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
		"Quarantined":    func() error { _, err := s.Quarantined(ctx, s.q(2)); return err },
		"Close":          s.Close,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// testConcurrent commits while readers scan; run it under -race.
func testConcurrent(t *testing.T, s *handle) {
	const batches, perBatch = 30, 20
	c := s.chain()
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := range batches {
			recs := c.records(t, perBatch)
			b := &engine.Batch{
				Audit:      recs,
				Keys:       s.keys(uint64(i*perBatch+1), uint64((i+1)*perBatch)),
				NextKey:    uint64((i+1)*perBatch + 1),
				EvictBelow: uint64(max(0, (i-5)*perBatch)),
				Sources:    []engine.SourceState{sourceState("r", []string{"a"}, int64(i))},
				Entities:   []engine.EntityState{entityState("e", int64(i))},
				Quarantine: []engine.QuarantineEntry{quarantineEntry(s.q(recs[0].Position), []byte("q")), quarantineEntry(s.q(recs[1].Position), nil)},
			}
			if i > 0 {
				b.Resolved = []uint64{s.q(recs[0].Position - perBatch)}
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

func readWhileCommitting(t *testing.T, s *handle, done <-chan struct{}) {
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
