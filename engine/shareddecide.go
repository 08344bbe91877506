package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// skipRounds is how many parts of one batch leave out the rows other
// members hold (Reads.SkipHeld); the part after them waits for the rows.
const skipRounds = 4

// decideBatch decides and commits one batch. Called with e.mu held.
//
// A batch that touches a row another member's batch holds does not wait
// for it with every row it holds itself (Reads.SkipHeld): it commits the
// deliveries that touch none of the held rows first, then the others in a
// batch of their own (decideParts). Deliveries that share a source window,
// an entity or a key keep their order (splitHeld); the audit chain records
// each part's after the one before. A batch whose rows the store's server
// cannot lock at once (ErrLockTable) is decided in halves (decideHalves).
func (w *sharedWindows) decideBatch(ctx context.Context, msgs []Message) ([]Decision, error) {
	if err := w.appendUnjournaled(); err != nil {
		return nil, err
	}
	w.keptDecisions(msgs)
	if partlyCommitted(msgs) {
		return w.decideRest(ctx, msgs, uncommitted(msgs))
	}
	w.halved, w.lockTable = 0, nil
	out, err := w.decideParts(ctx, msgs, w.e.opts.Now(), 0)
	if w.halved > 0 {
		w.e.log.Warn("the store's server could not hold the locks of a batch's rows at once: it was decided in smaller parts",
			"messages", len(msgs), "splits", w.halved, "committed", err == nil, "err", w.lockTable)
	}
	return out, err
}

// decideParts decides and commits msgs as part round of a batch read at
// now. Its decisions are timed when the rows are read (each try): a part
// that waited for rows another member held, or a try after another
// member's commit changed them, is decided after that commit, and its
// records say so, as a group's audit log merged by time must. While
// rounds are left, it leaves out the rows another member holds
// and decides what touches them in the next part, which skips held rows
// again if this part decided something: by then the member that held them
// has mostly committed, and the rows are free without a wait. A part that
// could decide nothing, or the last, waits for the rows instead.
func (w *sharedWindows) decideParts(ctx context.Context, msgs []Message, now time.Time, round int) ([]Decision, error) {
	e := w.e
	out := make([]Decision, len(msgs))
	r := e.reads(msgs, now)
	// Not a batch its kind places (its rows are found while deciding), nor
	// a recovery's: what the store holds of a lost batch decided again must
	// be its first deliveries (decideHalves), never those that touch no
	// held row.
	r.SkipHeld = round < skipRounds && e.unread == nil && len(msgs) > 1 && msgs[0].recovery == 0
	var first, later []int // with rows held: the deliveries decided now, and after
	var at time.Time       // when they were decided: the parts after are decided no earlier
	err := w.updateWith(ctx, r, func(rows *Rows) {
		at = notBefore(e.opts.Now(), now)
		w.decidedAt = at
		first, later = splitHeld(msgs, rows.Held)
		if later == nil {
			e.pending.expect(len(msgs))
			for i := range msgs {
				out[i] = e.decideOne(&msgs[i], at, 0, "")
			}
			return
		}
		e.pending.expect(len(first))
		for _, i := range first {
			out[i] = e.decideOne(&msgs[i], at, 0, "")
		}
	}, func() ([]Message, []Decision) {
		if later == nil {
			return msgs, out
		}
		return pick(msgs, first), pick(out, first)
	})
	switch {
	case errors.Is(err, ErrLockTable) && len(msgs) > 1:
		w.halved, w.lockTable = w.halved+1, err
		return w.decideHalves(ctx, msgs, now, round)
	case errors.Is(err, ErrLockTable) && w.halved > 0:
		return nil, fmt.Errorf("a batch decided in parts, down to one delivery: %w", err)
	}
	var unjournaled errNotJournaled
	if errors.As(err, &unjournaled) { // committed: passed again, they keep their decisions
		if later == nil {
			first = nil
			for i := range msgs {
				first = append(first, i)
			}
		}
		for _, i := range first {
			w.markCommitted(&msgs[i], &out[i])
		}
	}
	if err != nil {
		return nil, err
	}
	if later == nil {
		return out, nil
	}
	// This part is committed: passed again after a later part fails, its
	// deliveries keep their decisions (the caller passes the same messages
	// until the batch commits).
	for _, i := range first {
		w.markCommitted(&msgs[i], &out[i])
	}
	next := round + 1
	if len(first) == 0 { // every delivery touched a held row: wait for them
		next = skipRounds
	}
	rest := pick(msgs, later)
	decided, err := w.decideParts(ctx, rest, notBefore(e.opts.Now(), at), next)
	for j, i := range later { // what a later part committed stays marked
		msgs[i] = rest[j]
	}
	if err != nil {
		return nil, err
	}
	for _, i := range first {
		msgs[i].committed = nil
	}
	for j, i := range later {
		out[i] = decided[j]
	}
	return out, nil
}

// notBefore is t, or floor when t is before it (a clock stepped back),
// compared by their wall clocks, which the records hold: times read from
// time.Now carry a monotonic reading too, and Before would compare those.
func notBefore(t, floor time.Time) time.Time {
	t, floor = t.Round(0), floor.Round(0)
	if t.Before(floor) {
		return floor
	}
	return t
}

// decideHalves decides msgs, which the store's server could not lock at
// once (ErrLockTable, nothing written), as two parts of their batch: the
// first half, then the second, each read and locked on its own and split
// again while it fails so. Each half holds about half the locks of new
// rows, and the second follows the first whole, so deliveries that share
// a source window, an entity or a key keep their order.
//
// A recovery's batch, one entry of the journal, is decided so too: each
// part is journaled as a batch that decides again part of the lost one
// (JournalEntry.Redecides), and a part commits only after every part
// before it, so what the store holds of the lost batch, when a recovery
// is cut short between parts, is always its first deliveries, as many as
// those parts hold: a recovery taken up again decides the rest
// (sharedWindows.settled).
func (w *sharedWindows) decideHalves(ctx context.Context, msgs []Message, now time.Time, round int) ([]Decision, error) {
	half := len(msgs) / 2
	first, err := w.decideParts(ctx, msgs[:half], now, round)
	if err != nil {
		return nil, err
	}
	// Committed: passed again after the second half fails, the first
	// keeps its decisions.
	for i := range first {
		w.markCommitted(&msgs[i], &first[i])
	}
	second, err := w.decideParts(ctx, msgs[half:], notBefore(w.e.opts.Now(), w.decidedAt), round)
	if err != nil {
		return nil, err
	}
	for i := range first {
		msgs[i].committed = nil
	}
	return append(first, second...), nil
}

// markCommitted notes in m the decision d a part of its batch committed.
func (w *sharedWindows) markCommitted(m *Message, d *Decision) {
	m.committed, m.committedAt = d, len(w.lost)
}

// keptDecisions forgets, in msgs, each decision an earlier part of their
// batch committed at a position a store loss accepted since then gave
// up: the store no longer holds it, and the delivery, never acknowledged,
// is decided again rather than handed a decision that is gone.
func (w *sharedWindows) keptDecisions(msgs []Message) {
	for i := range msgs {
		m := &msgs[i]
		if m.committed == nil {
			continue
		}
		for _, s := range w.lost[min(m.committedAt, len(w.lost)):] {
			if s.From <= m.committed.Position && m.committed.Position <= s.To {
				m.committed = nil
				break
			}
		}
	}
}

// partlyCommitted reports whether an earlier attempt of the batch msgs
// committed some of them.
func partlyCommitted(msgs []Message) bool {
	for i := range msgs {
		if msgs[i].committed != nil {
			return true
		}
	}
	return false
}

// uncommitted returns the indexes of msgs that no earlier attempt of the
// batch committed.
func uncommitted(msgs []Message) []int {
	todo := make([]int, 0, len(msgs))
	for i := range msgs {
		if msgs[i].committed == nil {
			todo = append(todo, i)
		}
	}
	return todo
}

// decideRest decides the deliveries of msgs at todo, the others having
// been committed by an earlier attempt whose second part failed, and
// returns every delivery's decision.
func (w *sharedWindows) decideRest(ctx context.Context, msgs []Message, todo []int) ([]Decision, error) {
	rest := pick(msgs, todo)
	var decided []Decision
	var err error
	if len(rest) > 0 {
		decided, err = w.decideBatch(ctx, rest)
	}
	for j, i := range todo { // what the attempt committed stays marked
		msgs[i] = rest[j]
	}
	if err != nil {
		return nil, err
	}
	out := make([]Decision, len(msgs))
	for i := range msgs {
		if msgs[i].committed != nil {
			out[i], msgs[i].committed = *msgs[i].committed, nil
		}
	}
	for j, i := range todo {
		out[i] = decided[j]
	}
	return out, nil
}

// splitHeld returns, when held names rows, which of msgs to decide now
// and which to leave to a batch after this one: each delivery that touches
// a held row (its source window, an entity its effects name), and each
// after it that touches a row or key one left behind touches. It returns
// nil, nil when nothing is held: every delivery is decided now.
func splitHeld(msgs []Message, held HeldRows) (now, later []int) {
	if held.Empty() {
		return nil, nil
	}
	busy := make(map[string]bool, len(held.Sources)+len(held.Entities))
	for _, id := range held.Sources {
		busy["s"+id] = true
	}
	for _, name := range held.Entities {
		busy["e"+name] = true
	}
	var touched []string
	for i := range msgs {
		d := msgs[i].prepared
		if msgs[i].prepErr != nil || d == nil { // malformed: it touches no row
			now = append(now, i)
			continue
		}
		touched = append(touched[:0], "k"+string(d.key[:]))
		if d.seq >= 0 {
			touched = append(touched, "s"+sourceID(d.route.Name, d.source))
		}
		for _, name := range d.entities {
			if name != "" {
				touched = append(touched, "e"+name)
			}
		}
		if !slices.ContainsFunc(touched, func(t string) bool { return busy[t] }) {
			now = append(now, i)
			continue
		}
		later = append(later, i)
		for _, t := range touched {
			busy[t] = true
		}
	}
	if later == nil { // the held rows were named by no delivery
		return nil, nil
	}
	return now, later
}

// pick returns the elements of s at the indexes idx, in their order.
func pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = s[i]
	}
	return out
}
