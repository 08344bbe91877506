package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// errBatchFull stops a scan once a batch is full.
var errBatchFull = errors.New("batch full")

// deliver exports the next batch of chain after the sink's cursor and then
// advances the cursor in the store. It returns how many records it
// delivered. A chain not given delivers nothing; one taken away meanwhile
// (SetChains) has its batch cancelled, and delivers nothing either.
func (s *Set) deliver(ctx context.Context, r *runner, chain string) (int, error) {
	fctx, land, ok := s.fly(ctx, chain)
	if !ok {
		return 0, nil
	}
	defer land()
	n, err := s.deliverBatch(fctx, r, chain)
	if err != nil && fctx.Err() != nil && ctx.Err() == nil {
		return 0, nil // taken away: whoever has the chain next delivers it from the cursor in the store
	}
	return n, err
}

// fly starts a delivery of chain, unless the chain is not given; land
// ends it. SetChains cancels the deliveries of a chain it takes away and
// waits for them to land.
func (s *Set) fly(ctx context.Context, chain string) (_ context.Context, land func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.chains, chain) {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &flight{chain: chain, cancel: cancel, done: make(chan struct{})}
	s.flights[f] = struct{}{}
	return ctx, func() {
		s.mu.Lock()
		delete(s.flights, f)
		s.mu.Unlock()
		cancel()
		close(f.done)
	}, true
}

// deliverBatch is deliver's work once the delivery started.
func (s *Set) deliverBatch(ctx context.Context, r *runner, chain string) (int, error) {
	rewinds := r.rewound(chain)
	c, err := s.loadCursor(ctx, r, chain)
	if err != nil {
		return 0, fmt.Errorf("read cursor: %w", err)
	}
	from := c + 1
	batch := make([]engine.AuditRecord, 0, min(s.opts.Batch, 64))
	err = s.logs.scan(ctx, chain, from, func(rec engine.AuditRecord) error {
		batch = append(batch, rec)
		if len(batch) >= s.opts.Batch {
			return errBatchFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errBatchFull) {
		return 0, fmt.Errorf("read the audit log from position %d: %w", from, err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	if batch[0].Position != from {
		// Retention dropped records this sink never delivered: say so
		// loudly, and go on from what the store still holds.
		s.log.Error("audit sink missed records the store no longer holds (they are in the audit archive)",
			append(sinkAttrs(r.Name, chain), "from", from, "to", batch[0].Position-1)...)
	}
	if err := r.Exporter.Export(ctx, batch); err != nil {
		return 0, err
	}
	lastRec := batch[len(batch)-1]
	last := lastRec.Position
	if r.rewound(chain) != rewinds {
		// The chain went back below the batch meanwhile: the records the
		// member decided again at its positions go next.
		r.delivered.Add(uint64(len(batch)))
		return len(batch), nil
	}
	err = s.logs.setCursor(ctx, chain, r.Name, engine.AuditHead{Position: last, Hash: lastRec.Hash})
	if errors.Is(err, engine.ErrCursorRecord) {
		// The batch was read from a store that failed over since, to a
		// standby lacking its records: the chain holds others at those
		// positions, or none yet. The rewind on a commit at or below the
		// cursor may have come after the check above; the cursor in the
		// store stays where the chain still holds what it names, so a
		// restart delivers them too, and this one reads them next.
		s.log.Warn("audit sink delivered records the store no longer holds (a failover); delivering the chain's from its cursor",
			append(sinkAttrs(r.Name, chain), "from", from, "to", last)...)
		r.delivered.Add(uint64(len(batch)))
		return len(batch), nil
	}
	if err != nil {
		return 0, fmt.Errorf("save cursor %d: %w", last, err)
	}
	r.advance(chain, batch, rewinds)
	r.delivered.Add(uint64(len(batch)))
	s.raise(chain, last)
	return len(batch), nil
}

// loadCursor returns the sink's cursor on chain, read from the store the
// first time the chain is delivered since it was given.
func (s *Set) loadCursor(ctx context.Context, r *runner, chain string) (uint64, error) {
	r.mu.Lock()
	c, ok := r.cursors[chain]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := s.logs.cursor(ctx, chain, r.Name)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if slices.Contains(s.chains, chain) { // else taken away meanwhile: read it again when given again
		r.mu.Lock()
		r.cursors[chain] = c
		r.mu.Unlock()
	}
	s.mu.Unlock()
	s.raise(chain, c)
	return c, nil
}

// advance moves the sink's cursor on chain to the end of batch, which it
// delivered, unless the chain was taken away meanwhile, or its cursor was
// rewound since the batch read it (rewinds, as rewound returned then,
// says which).
func (r *runner) advance(chain string, batch []engine.AuditRecord, rewinds uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cursors[chain]; ok && r.rewinds[chain] == rewinds {
		r.cursors[chain] = batch[len(batch)-1].Position
		rc := r.recent[chain]
		if rc == nil {
			rc = new(recent)
			r.recent[chain] = rc
		}
		for _, rec := range batch {
			rc.put(rec)
		}
	}
}

// rewind moves the sink's cursor on first's chain back to just before
// first, the first record of a commit, when the chain went back under the
// cursor: the sink delivered another record at first's position (the
// store lost the member's commits and the member decided them again), or
// one it no longer knows. A commit the sink already delivered as it is
// (it reads the store, which holds a commit before the commit is told)
// moves nothing.
func (r *runner) rewind(first engine.AuditRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	chain := first.Member
	c, ok := r.cursors[chain]
	if !ok || c < first.Position {
		return
	}
	if rc := r.recent[chain]; rc != nil && rc.holds(first) {
		return
	}
	r.cursors[chain] = first.Position - 1
	r.rewinds[chain]++
}

// recentRecords is how many of the records a sink delivered last on a
// chain it remembers by position, to tell a commit it delivered already
// from a chain that went back.
const recentRecords = 8192

// recent holds the hashes of the records a sink delivered last on a
// chain, by position modulo recentRecords.
type recent [recentRecords]struct {
	pos  uint64
	hash engine.Hash
}

func (rc *recent) put(rec engine.AuditRecord) {
	rc[rec.Position%recentRecords] = struct {
		pos  uint64
		hash engine.Hash
	}{rec.Position, rec.Hash}
}

// holds reports whether the sink delivered rec as it is.
func (rc *recent) holds(rec engine.AuditRecord) bool {
	e := rc[rec.Position%recentRecords]
	return e.pos == rec.Position && e.hash == rec.Hash
}

// rewound returns how often chain's cursor was rewound.
func (r *runner) rewound(chain string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rewinds[chain]
}

// cursor is the sink's cursor on chain as far as it knows; 0 before it
// read it.
func (r *runner) cursor(chain string) uint64 {
	c, _ := r.cursorRead(chain)
	return c
}

// cursorRead is cursor, and whether the sink read it from the store.
func (r *runner) cursorRead(chain string) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cursors[chain]
	return c, ok
}
