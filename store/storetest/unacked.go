package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The case of a member killed between a batch's commit to the group's
// store and its journal append: the deliveries were never acknowledged,
// so the broker delivers them again to the member started again, and a
// delivery the batch held must not be held a second time.

// killJournal is a member's journal that outlives the member's process,
// as its directory does; refuse makes the next append fail, as the append
// of a process killed before it wrote does. Like package journal's, Last
// returns the newest batch without its deliveries, which Replay reads.
type killJournal struct {
	entries []engine.JournalEntry
	refuse  bool
}

var errKilled = errors.New("the member was killed before its journal took the batch")

func (j *killJournal) Append(e engine.JournalEntry) error {
	if j.refuse {
		j.refuse = false
		return errKilled
	}
	j.entries = append(j.entries, e)
	return nil
}

func (j *killJournal) Last() (last engine.JournalEntry, recovering *engine.JournalEntry) {
	for _, e := range slices.Backward(j.entries) {
		if e.Kind == engine.JournalBatch {
			e.Messages, e.Effective = nil, nil
			return e, nil
		}
	}
	return engine.JournalEntry{}, nil
}

// Replay calls fn for the batches after the newest whose head is after,
// or, when none is, after the newest at or below after's position. Its
// cases lose no commit: nothing is uncovered.
func (j *killJournal) Replay(after engine.AuditHead, fn func(engine.JournalEntry) error) (engine.Span, error) {
	from := 0
	for i, e := range j.entries {
		if e.Kind == engine.JournalBatch && e.Head == after {
			from = i + 1
		}
	}
	if from == 0 {
		for i, e := range j.entries {
			if e.Kind == engine.JournalBatch && e.Head.Position <= after.Position {
				from = i + 1
			}
		}
	}
	for _, e := range j.entries[from:] {
		if e.Kind != engine.JournalBatch || fn == nil {
			continue
		}
		if err := fn(e); err != nil {
			return engine.Span{}, err
		}
	}
	return engine.Span{}, nil
}

func journaledEngine(t *testing.T, h *handle, j engine.Journal) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), h.Store, engine.Options{Routes: sharedRoutes, Journal: j})
	if err != nil {
		t.Fatalf("engine on member %s: %v", h.Member(), err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// testSharedHeldOnceAfterAKill: a member killed after its batch committed
// and before its journal took it holds each message the batch held once.
// Started again, the member finds the store ahead of its journal; the
// broker delivers the batch again (never acknowledged), and each held
// message is then a duplicate of its entry, its record naming the entry:
// one entry per held delivery, below the window, a conflict and malformed
// alike. Released, the entry below the window applies once; the chain
// verifies.
func testSharedHeldOnceAfterAKill(t *testing.T, p *place) {
	ctx := t.Context()
	j := &killJournal{}
	h := p.handle(t, "m1")
	e := journaledEngine(t, h, j)
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	j.refuse = true
	if _, err := e.Process(ctx, heldBatch()); !errors.Is(err, errKilled) {
		t.Fatalf("the batch the journal did not take: %v, want the journal's failure", err)
	}
	e.Close()
	heldOnceAgain(t, p, h, j)
}

// testSharedHeldOnceAfterAKillBeforeTheAck: a member killed after its
// journal took a batch and before the batch's acknowledgements reached
// the broker holds each message the batch held once: delivered again to
// the member started again, each is a duplicate of its entry.
func testSharedHeldOnceAfterAKillBeforeTheAck(t *testing.T, p *place) {
	j := &killJournal{}
	h := p.handle(t, "m1")
	e := journaledEngine(t, h, j)
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	mustProcess(t, e, heldBatch()...)
	e.Close()
	heldOnceAgain(t, p, h, j)
}

// heldBatch is a batch, after incident(100000, 0) and meter(1, "1"), that
// holds its first three messages and applies the fourth.
func heldBatch() []engine.Message {
	return []engine.Message{
		incident(1, 1), // below the window: quarantined
		meter(1, "5"),  // the key applied with other content: a conflict
		{Topic: "incidents/fd", Payload: []byte(`{"agency":`)}, // malformed
		meter(2, "2"), // applied
	}
}

// heldOnceAgain starts member m1 again on h, after its engine, whose last
// batch was heldBatch, was killed before the batch was acknowledged, and
// has the broker deliver the batch again: each held message must be a
// duplicate of its entry, and a release apply once.
func heldOnceAgain(t *testing.T, p *place, h *handle, j *killJournal) {
	t.Helper()
	ctx := t.Context()
	h = p.reopen(t, h)
	e := journaledEngine(t, h, j)
	again := heldBatch()
	for i := range again {
		again[i].Dup = true
	}
	ds, err := e.Process(ctx, again)
	if err != nil {
		t.Fatalf("the batch delivered again: %v", err)
	}
	ids := []uint64{h.q(3), h.q(4), h.q(5)} // the entries of the first commit, at positions 3..5
	for i, d := range ds {
		if d.Outcome != engine.Duplicate {
			t.Errorf("delivery %d again: %s (%s), want a duplicate", i, d.Outcome, d.Reason)
		}
		if i < len(ids) && !strings.Contains(d.Reason, fmt.Sprintf("held in quarantine as #%d ", ids[i])) {
			t.Errorf("delivery %d again: reason %q, want it to name entry #%d", i, d.Reason, ids[i])
		}
		if d.Held != 0 {
			t.Errorf("delivery %d again: held as #%d, want no entry", i, d.Held)
		}
	}
	var held []uint64
	for _, q := range scanQuarantine(t, h) {
		held = append(held, q.ID)
	}
	equal(t, "quarantine entries", held, ids)
	recs := scanAudit(t, h, 1)
	var prev engine.Hash
	for i, r := range recs {
		if r.Position != uint64(i+1) || r.Prev != prev {
			t.Fatalf("record %d: position %d, prev %s: the chain does not link", i+1, r.Position, r.Prev)
		}
		if hash, _ := engine.ChainHash(r); hash != r.Hash {
			t.Fatalf("record %d: hash %s, its content hashes to %s", r.Position, r.Hash, hash)
		}
		prev = r.Hash
	}
	if len(recs) != 10 {
		t.Fatalf("%d records, want 10: two, the four of the commit never acknowledged, the four of its delivery again", len(recs))
	}
	// One release applies the message held below the window, once.
	if d, err := e.Release(ctx, ids[0], "duty officer"); err != nil || d.Outcome != engine.Applied {
		t.Fatalf("release #%d: %+v, %v; want applied", ids[0], d, err)
	}
	if _, err := e.Release(ctx, ids[0], "duty officer"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("release #%d again: %v, want ErrNotFound", ids[0], err)
	}
	if got := groupField(t, e, "incident/7", "casualties"); got != "1" {
		t.Fatalf("incident/7 casualties = %s, want 1: the released message applied once", got)
	}
	if got := groupField(t, e, "meter/m1", "kwh"); got != "3" {
		t.Fatalf("meter/m1 kwh = %s, want 3: readings 1 and 2 applied once, the conflict held", got)
	}
}

// answerLost is a member's handle on a group's store whose next Update,
// once armed, commits and then fails, as a commit whose answer the
// connection lost.
type answerLost struct {
	engine.Store
	caps engine.Capabilities
}

func (s *answerLost) Capabilities() engine.Capabilities { return s.caps }

type losingUpdates struct {
	engine.SharedStore
	armed bool
}

var errAnswerLost = errors.New("connection reset: the commit's answer was lost")

func (s *losingUpdates) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	err := s.SharedStore.Update(ctx, r, decide)
	if err == nil && s.armed {
		s.armed = false
		return errAnswerLost
	}
	return err
}

// testSharedHeldOnceAfterALostAnswer: a batch whose commit landed though
// its answer was lost is passed again, as a batch that failed; the member
// finds the store ahead of its journal, and each message the batch held
// is then a duplicate of its entry: held once.
func testSharedHeldOnceAfterALostAnswer(t *testing.T, p *place) {
	ctx := t.Context()
	h := p.handle(t, "m1")
	up := &losingUpdates{SharedStore: h.caps.Shared}
	caps := h.caps
	caps.Shared = up
	e, err := engine.New(ctx, &answerLost{Store: h.Store, caps: caps}, engine.Options{Routes: sharedRoutes, Journal: &killJournal{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	batch := heldBatch()
	up.armed = true
	if _, err := e.Process(ctx, batch); !errors.Is(err, errAnswerLost) {
		t.Fatalf("the batch whose answer was lost: %v, want the lost answer", err)
	}
	ds, err := e.Process(ctx, batch)
	if err != nil {
		t.Fatalf("the batch passed again: %v", err)
	}
	for i, d := range ds {
		if d.Outcome != engine.Duplicate || d.Held != 0 {
			t.Errorf("delivery %d passed again: %s, held as #%d (%s); want a duplicate, no entry", i, d.Outcome, d.Held, d.Reason)
		}
	}
	var held []uint64
	for _, q := range scanQuarantine(t, h) {
		held = append(held, q.ID)
	}
	equal(t, "quarantine entries", held, []uint64{h.q(3), h.q(4), h.q(5)})
}

// testSharedHeldOnceAfterTwoLostAnswers: two commits in a row whose
// answers were lost, the second the batch passed again, make the member
// reload twice from the same journal head and read the first commit's
// entries twice. Each entry still takes one delivery of those noted: the
// batch passed again is a duplicate of each. A second delivery of the
// message held below the window, in the same batch, is a duplicate of the
// same entry too, as an open entry of its key and content (held.go): it
// used to be held under an entry of its own, one more to release.
func testSharedHeldOnceAfterTwoLostAnswers(t *testing.T, p *place) {
	ctx := t.Context()
	h := p.handle(t, "m1")
	up := &losingUpdates{SharedStore: h.caps.Shared}
	caps := h.caps
	caps.Shared = up
	e, err := engine.New(ctx, &answerLost{Store: h.Store, caps: caps}, engine.Options{Routes: sharedRoutes, Journal: &killJournal{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	up.armed = true
	if _, err := e.Process(ctx, heldBatch()); !errors.Is(err, errAnswerLost) {
		t.Fatalf("the batch whose answer was lost: %v, want the lost answer", err)
	}
	up.armed = true
	if _, err := e.Process(ctx, heldBatch()); !errors.Is(err, errAnswerLost) {
		t.Fatalf("the batch passed again, its answer lost too: %v, want the lost answer", err)
	}
	ds, err := e.Process(ctx, []engine.Message{incident(1, 1), incident(1, 1)})
	if err != nil {
		t.Fatalf("two deliveries of the message held below the window: %v", err)
	}
	if d := ds[0]; d.Outcome != engine.Duplicate || !strings.Contains(d.Reason, fmt.Sprintf("held in quarantine as #%d ", h.q(3))) {
		t.Errorf("first delivery: %s (%s), want a duplicate of #%d", d.Outcome, d.Reason, h.q(3))
	}
	if d := ds[1]; d.Outcome != engine.Duplicate || d.Held != 0 || !strings.HasPrefix(d.Reason, fmt.Sprintf("delivered again: held in quarantine as #%d, an open entry of the same key and content", h.q(3))) {
		t.Errorf("second delivery: %s, held as #%d (%s); want a duplicate of the open entry #%d of its key and content", d.Outcome, d.Held, d.Reason, h.q(3))
	}
	var held []uint64
	for _, q := range scanQuarantine(t, h) {
		held = append(held, q.ID)
	}
	equal(t, "quarantine entries", held, []uint64{h.q(3), h.q(4), h.q(5)})
}

// testSharedHeldDiscardedThenPublishedAgain: a member started again notes
// what its journal's last batch held, whether or not the broker delivers
// the batch again. An entry the operator discards on the member is no
// longer one that holds a delivery: the same message published after the
// discard is held again, under a new entry, not recorded as a duplicate
// of the entry discarded.
func testSharedHeldDiscardedThenPublishedAgain(t *testing.T, p *place) {
	ctx := t.Context()
	j := &killJournal{}
	h := p.handle(t, "m1")
	e := journaledEngine(t, h, j)
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	mustProcess(t, e, heldBatch()...)
	e.Close()
	h = p.reopen(t, h)
	e = journaledEngine(t, h, j)
	if _, err := e.Discard(ctx, h.q(3), "stale reading", "duty officer"); err != nil {
		t.Fatalf("discard #%d: %v", h.q(3), err)
	}
	ds, err := e.Process(ctx, []engine.Message{incident(1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[0]; d.Outcome != engine.Quarantined || d.Held == 0 {
		t.Errorf("published again after #%d was discarded: %s, held as #%d (%s); want quarantined under a new entry", h.q(3), d.Outcome, d.Held, d.Reason)
	}
}

// testSharedHeldPublishedAnewAfterARestart: a member stopped after its
// last batch, which held a message, was acknowledged; started again, it
// notes what that batch held, and the broker delivers nothing again. The
// same bytes published anew (not flagged as sent again) are not that
// delivery; a message with a key is still a duplicate of the open entry
// of its key and content (held.go), whoever sends it again. A malformed
// one, without a key, published anew is held again, under an entry of its
// own, where a delivery flagged as sent again is a duplicate of the entry.
func testSharedHeldPublishedAnewAfterARestart(t *testing.T, p *place) {
	ctx := t.Context()
	j := &killJournal{}
	h := p.handle(t, "m1")
	e := journaledEngine(t, h, j)
	mustProcess(t, e, incident(100000, 0), meter(1, "1"))
	mustProcess(t, e, heldBatch()...)
	e.Close()
	h = p.reopen(t, h)
	e = journaledEngine(t, h, j)
	ds, err := e.Process(ctx, []engine.Message{incident(1, 1), heldBatch()[2]})
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[0]; d.Outcome != engine.Duplicate || d.Held != 0 || !strings.HasPrefix(d.Reason, fmt.Sprintf("delivered again: held in quarantine as #%d, an open entry", h.q(3))) {
		t.Errorf("published anew after the restart: %s, held as #%d (%s); want a duplicate of the open entry #%d", d.Outcome, d.Held, d.Reason, h.q(3))
	}
	if d := ds[1]; d.Outcome != engine.Malformed || d.Held == 0 || d.Held == h.q(5) {
		t.Errorf("malformed, published anew after the restart: %s, held as #%d (%s); want held under a new entry, not #%d", d.Outcome, d.Held, d.Reason, h.q(5))
	}
	again := heldBatch()[2] // the malformed one, delivered again by the broker
	again.Dup = true
	ds, err = e.Process(ctx, []engine.Message{again})
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[0]; d.Outcome != engine.Duplicate || !strings.Contains(d.Reason, fmt.Sprintf("held in quarantine as #%d ", h.q(5))) {
		t.Errorf("delivered again, flagged so: %s (%s); want a duplicate of #%d", d.Outcome, d.Reason, h.q(5))
	}
}
