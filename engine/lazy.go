package engine

import (
	"context"
	"fmt"
)

// lazyRows reads, for the windows of a single-owner store that declares
// Capabilities.Rows, the sources and entities a batch needs that the
// engine's memory lacks; the engine then loads none at start, and keeps
// in memory about Options.CachedRows of them.
//
// A row is let go (trim, dropFresh) only once the batch that last changed
// it is committed: a row missing from memory has no write in flight, so
// the committed row the store returns is its state. Rows the batches in
// flight changed stay, and the next batch is decided without waiting for
// them. A read that fails fails the batch it was made for: nothing
// decided in it is committed, and the engine reloads before deciding
// again.
type lazyRows struct {
	r     RowReader
	limit int
	ctx   context.Context // of the batch being decided
	tx    RowTx           // open while a batch is decided, from its first miss
	err   error           // the first failed read of the batch
	// sources and entities count the stored rows and those created
	// since, for Stats; a reload counts them again.
	sources, entities int
}

// begin starts the reads of a batch.
func (l *lazyRows) begin(ctx context.Context) { l.ctx, l.err = ctx, nil }

// end closes the batch's read and returns its first error.
func (l *lazyRows) end() error {
	l.release()
	err := l.err
	l.ctx, l.err = nil, nil
	return err
}

// release closes the batch's read if it is open. Deferred by who begins
// one, for a decision that panics: the read left open, the store's Close,
// deferred on the way out, would wait for it forever.
func (l *lazyRows) release() {
	if l.tx != nil {
		l.tx.Close()
		l.tx = nil
	}
}

// read opens the batch's read at its first miss; false after a failed read.
func (l *lazyRows) read() bool {
	if l.err != nil {
		return false
	}
	if l.tx == nil {
		if l.ctx == nil {
			l.err = fmt.Errorf("%w: a row was looked for outside a batch", ErrAborted)
			return false
		}
		tx, err := l.r.ReadRows(l.ctx)
		if err != nil {
			l.err = fmt.Errorf("read the store's rows: %w", err)
			return false
		}
		l.tx = tx
	}
	return true
}

// readSource reads the window stored under id into e.sources; nil when the
// store has none (or the read failed, which fails the batch).
func (e *Engine) readSource(id []byte) *SourceState {
	l := e.rows
	if !l.read() {
		return nil
	}
	st, found, err := l.tx.Source(string(id))
	if err != nil {
		// string(id), not id: a slice given to fmt escapes, and with it
		// the caller's stack buffer, for every message.
		l.err = fmt.Errorf("read source %q: %w", string(id), err)
		return nil
	}
	if !found {
		return nil
	}
	s := &st
	s.usedIn = e.pending.gen
	e.sources[string(id)] = s
	return s
}

// readEntity reads the entity stored under name into e.entities; nil when
// the store has none (or the read failed, which fails the batch).
func (e *Engine) readEntity(name string) *entity {
	l := e.rows
	if !l.read() {
		return nil
	}
	st, found, err := l.tx.Entity(name)
	if err != nil {
		l.err = fmt.Errorf("read entity %q: %w", name, err)
		return nil
	}
	if !found {
		return nil
	}
	ent := entityFromState(st)
	e.entities[st.Name] = ent
	return ent
}

// freshRows are the rows a batch created: their keys in e.sources and
// e.entities.
type freshRows struct {
	gen               uint64 // the batch's pending.gen
	sources, entities []string
}

// noteFresh queues the rows the batch of pending.gen gen created, sealed
// now. Called with e.mu held.
func (w *ownedWindows) noteFresh(gen uint64, f freshRows) {
	if len(f.sources)+len(f.entities) > 0 {
		f.gen = gen
		w.fresh = append(w.fresh, f)
	}
}

// dropFresh lets go the rows of the committed batches that created them
// that no batch looked up since. A fleet's meter creates its rows with
// its first reading and is not heard from again for minutes, a million
// meters later: kept, such rows would fill memory with what no batch
// reads, and make every garbage collection walk them. A row looked up
// again stays (trim bounds those); one let go is read from the store
// when it is looked up again, once. Called with e.mu held, before a
// batch is decided.
func (w *ownedWindows) dropFresh() {
	e := w.e
	landed := w.landedRows.Load()
	n := 0
	for ; n < len(w.fresh) && w.fresh[n].gen <= landed; n++ {
		f := &w.fresh[n]
		for _, k := range f.sources {
			if s := e.sources[k]; s != nil && s.usedIn == f.gen && s.changedIn <= landed {
				delete(e.sources, k)
			}
		}
		for _, k := range f.entities {
			if ent := e.entities[k]; ent != nil && ent.usedIn == f.gen && ent.changedIn <= landed {
				delete(e.entities, k)
			}
		}
		*f = freshRows{}
	}
	w.fresh = w.fresh[n:]
}

// trim lets rows go, down to three quarters of the limit, once memory
// holds more than the limit: only rows whose last change is committed,
// never one the pending batch or a batch in flight changed. Called with
// e.mu held, before a batch is decided (and so before its read opens,
// which then sees every commit landedRows counts).
func (w *ownedWindows) trim() {
	e := w.e
	l := e.rows
	if l == nil {
		return
	}
	w.dropFresh()
	if len(e.sources)+len(e.entities) <= l.limit {
		return
	}
	if e.reload.Load() {
		return // a commit failed: the reload starts afresh
	}
	landed := w.landedRows.Load()
	keep := l.limit * 3 / 4
	n := len(e.sources) + len(e.entities)
	for id, s := range e.sources { // map order: a random choice
		if n <= keep {
			return
		}
		if s.changedIn <= landed {
			delete(e.sources, id)
			n--
		}
	}
	for name, ent := range e.entities {
		if n <= keep {
			return
		}
		if ent.changedIn <= landed {
			delete(e.entities, name)
			n--
		}
	}
}

// settleRows ends the batch's reads. When one failed, the batch decided on
// it is dropped, the commits before it are waited for, and the engine
// reloads before it decides again. Called with e.mu held, before seal.
func (w *ownedWindows) settleRows() error {
	e := w.e
	var err error
	if e.rows != nil {
		err = e.rows.end()
	}
	if e.heldFind != nil {
		if herr := e.heldFind.end(); err == nil {
			err = herr
		}
	}
	if err == nil {
		return nil
	}
	e.resetPending()
	w.drain()
	e.reload.Store(true)
	e.log.Error("reading the store failed; the batch is dropped and the committed state reloaded", "err", err)
	return err
}
