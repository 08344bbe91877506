package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// readsStore is an embedded store that counts its row reads open, and
// the held entries looked up in the store while one is: a second bbolt
// read beside the engine's can wait forever for a commit that grows the
// file, which waits for the first. forward has its reads find held
// entries themselves (engine.HeldRowTx).
type readsStore struct {
	*embedded.Store
	forward              bool
	open, overlaps, inTx atomic.Int32
}

func (s *readsStore) Capabilities() engine.Capabilities {
	c := s.Store.Capabilities()
	c.Rows, c.Held = s, s
	return c
}

func (s *readsStore) ReadRows(ctx context.Context) (engine.RowTx, error) {
	tx, err := s.Store.ReadRows(ctx)
	if err != nil {
		return nil, err
	}
	s.open.Add(1)
	r := &readTx{RowTx: tx, s: s}
	if s.forward {
		return heldReadTx{r}, nil
	}
	return r, nil
}

func (s *readsStore) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	if s.open.Load() > 0 {
		s.overlaps.Add(1)
	}
	return s.Store.FindHeld(ctx, key, content)
}

type readTx struct {
	engine.RowTx
	s *readsStore
}

func (r *readTx) Close() {
	r.s.open.Add(-1)
	r.RowTx.Close()
}

type heldReadTx struct{ *readTx }

func (h heldReadTx) FindHeld(key, content engine.Hash) (uint64, bool, error) {
	h.s.inTx.Add(1)
	return h.RowTx.(engine.HeldRowTx).FindHeld(key, content)
}

// TestAHeldEntryIsLookedUpInTheBatchsRead: on a store that reads rows one
// at a time, a delivery about to be held is looked up in the read the
// batch holds, where the read can do it, and otherwise after that read is
// closed: never in a second read beside it (the engine's
// TestRowsReadAgainMatchAReferenceModel hung so, a commit growing the file
// waiting for the batch's read, the lookup's read for the commit).
func TestAHeldEntryIsLookedUpInTheBatchsRead(t *testing.T) {
	for _, forward := range []bool{true, false} {
		name := map[bool]string{true: "in the read", false: "after the read"}[forward]
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			open := func() (*readsStore, *engine.Engine) {
				st, err := embedded.Open(dir, embedded.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				s := &readsStore{Store: st, forward: forward}
				e, err := engine.New(ctx, s, engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 64})
				if err != nil {
					t.Fatal(err)
				}
				return s, e
			}
			s, e := open()
			held := inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`)
			if _, err := e.Process(ctx, []engine.Message{inc("fd", "e1", 1, 100, `"incident_id":1,"casualty_delta":1`), held}); err != nil {
				t.Fatal(err)
			}
			e.Close()
			s.Close()
			s, e = open() // its rows are read again: the batch holds a read as it decides
			defer s.Close()
			defer e.Close()
			ds, err := e.Process(ctx, []engine.Message{held})
			if err != nil {
				t.Fatal(err)
			}
			if ds[0].Outcome != engine.Duplicate {
				t.Fatalf("the held message again: %s (%s), want a duplicate of its entry", ds[0].Outcome, ds[0].Reason)
			}
			if n := s.overlaps.Load(); n != 0 {
				t.Errorf("%d held entries looked up in a second read beside the batch's", n)
			}
			if forward && s.inTx.Load() == 0 {
				t.Errorf("the held entry was not looked up in the batch's read, which can")
			}
		})
	}
}
