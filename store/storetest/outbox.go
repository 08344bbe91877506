package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// onOutbox runs fn on a harness around the store's first handle, which
// reopens it when the store is durable.
func onOutbox(fn func(t *testing.T, h *outboxHarness)) func(t *testing.T, p *place) {
	return func(t *testing.T, p *place) {
		s := p.first(t)
		h := &outboxHarness{s: s, member: s.member}
		if p.f.Durable {
			h.reopen = func() *handle { return p.reopen(t, h.s) }
		}
		fn(t, h)
	}
}

// outboxHarness is one store handle under test: a single-owner store, or
// one member of a group store.
type outboxHarness struct {
	s      *handle
	member string         // "" on a single-owner store
	c      chain          // the member's chain
	reopen func() *handle // closes s and opens its store again; nil when it keeps nothing
}

// ob is the handle's declared outbox.
func (h *outboxHarness) ob(t *testing.T) engine.OutboxStore {
	t.Helper()
	if h.s.caps.Outbox == nil {
		t.Fatalf("%T declares no Capabilities.Outbox", h.s.Store)
	}
	return h.s.caps.Outbox
}

// records returns n sealed records of the member's chain.
func (h *outboxHarness) records(t *testing.T, n int) []engine.AuditRecord {
	t.Helper()
	return memberRecords(t, &h.c, h.member, n)
}

func (h *outboxHarness) commit(t *testing.T, b *engine.Batch) {
	t.Helper()
	if err := h.s.Commit(t.Context(), b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// pending lists every pending entry of member, in pages of 2 to exercise after.
func pending(t *testing.T, o engine.OutboxStore, member string) []engine.OutboxEntry {
	t.Helper()
	var out []engine.OutboxEntry
	after := uint64(0)
	for {
		page, err := o.Outbox(t.Context(), member, after, 2)
		if err != nil {
			t.Fatalf("Outbox(%q, %d): %v", member, after, err)
		}
		if len(page) > 2 {
			t.Fatalf("Outbox(limit 2) returned %d entries", len(page))
		}
		if len(page) == 0 {
			return out
		}
		for _, e := range page {
			out = append(out, normalizeOutbox(e))
		}
		after = page[len(page)-1].ID
	}
}

func depth(t *testing.T, o engine.OutboxStore, member string) int {
	t.Helper()
	n, err := o.OutboxDepth(t.Context(), member)
	if err != nil {
		t.Fatalf("OutboxDepth(%q): %v", member, err)
	}
	return n
}

func held(t *testing.T, o engine.OutboxStore) []engine.HeldEntry {
	t.Helper()
	hs, err := o.OutboxHeld(t.Context())
	if err != nil {
		t.Fatalf("OutboxHeld: %v", err)
	}
	for i := range hs {
		hs[i].OutboxEntry = normalizeOutbox(hs[i].OutboxEntry)
	}
	if len(hs) == 0 {
		return nil
	}
	return hs
}

func done(t *testing.T, o engine.OutboxStore, member string, ids ...uint64) {
	t.Helper()
	if err := o.OutboxDone(t.Context(), member, ids); err != nil {
		t.Fatalf("OutboxDone(%q, %v): %v", member, ids, err)
	}
}

// normalizeOutbox puts an entry in a comparable form: time in UTC, empty
// slices nil.
func normalizeOutbox(e engine.OutboxEntry) engine.OutboxEntry {
	e.Time = e.Time.UTC()
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
	if len(e.Source) == 0 {
		e.Source = nil
	}
	return e
}

// outboxEntry is forward i of the decision recorded by r.
func outboxEntry(r engine.AuditRecord, i int, payload []byte) engine.OutboxEntry {
	e := engine.OutboxEntry{ID: engine.OutboxID(r.Position, i), Output: engine.OutputMQTT,
		Target: fmt.Sprintf("clean/%s/%d", r.Topic, i), Route: r.Route, Topic: r.Topic, Source: r.Source,
		Key: r.Key, Epoch: r.Epoch, Sequence: -1, Time: r.Time, Payload: payload}
	switch i % 3 {
	case 1:
		e.Output, e.Target = engine.OutputWebhook, "https://cop.example/hooks/incidents?x=1&y=ü"
	case 2:
		e.Output, e.Target = engine.OutputNATS, "cop.incidents."+r.Source[0]
	}
	if r.Sequence != nil {
		e.Sequence = *r.Sequence
	}
	return normalizeOutbox(e)
}

func ids(es []engine.OutboxEntry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// outboxPayloads are payloads whose bytes must come back exactly.
var outboxPayloads = [][]byte{[]byte(`{"casualties":3}`), nil, {0}, []byte("\xff\xfe\x00binary\r\n"), []byte(`{"a":"\u0000"}`), bytes.Repeat([]byte("x1"), 150<<10)}

// threeBatches commits three batches with entries: forwards 0 and 1 of
// the first record, forward 2 of the third, then one entry per payload.
func threeBatches(t *testing.T, h *outboxHarness) []engine.OutboxEntry {
	t.Helper()
	recs := h.records(t, 3)
	want := []engine.OutboxEntry{outboxEntry(recs[0], 0, outboxPayloads[0]), outboxEntry(recs[0], 1, outboxPayloads[0]), outboxEntry(recs[2], 2, []byte("third"))}
	h.commit(t, &engine.Batch{Audit: recs, Outbox: slices.Clone(want)})
	h.commit(t, &engine.Batch{Audit: h.records(t, 2)}) // no entries
	recs = h.records(t, len(outboxPayloads))
	b := &engine.Batch{Audit: recs}
	for i, p := range outboxPayloads {
		b.Outbox = append(b.Outbox, outboxEntry(recs[i], 0, p))
	}
	h.commit(t, b)
	return append(want, b.Outbox...)
}

func testOutboxList(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	if got := pending(t, o, h.member); len(got) != 0 || depth(t, o, h.member) != 0 {
		t.Fatalf("a new store's outbox holds %d entries", len(got))
	}
	want := threeBatches(t, h)
	got := pending(t, o, h.member)
	equalEntries(t, "pending entries", got, want)
	if n := depth(t, o, h.member); n != len(want) {
		t.Errorf("OutboxDepth = %d, want %d", n, len(want))
	}
	page, err := o.Outbox(t.Context(), h.member, want[1].ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(page), ids(want[2:])) {
		t.Errorf("Outbox(after %d) = %v, want %v", want[1].ID, ids(page), ids(want[2:]))
	}
	page, err = o.Outbox(t.Context(), h.member, want[len(want)-1].ID, 100)
	if err != nil || len(page) != 0 {
		t.Errorf("Outbox after the last entry = %d entries, %v", len(page), err)
	}
	if hs := held(t, o); hs != nil {
		t.Errorf("OutboxHeld = %+v, want none", hs)
	}
}

// equalEntries compares entries, naming the first that differs.
func equalEntries(t *testing.T, what string, got, want []engine.OutboxEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries %v, want %d %v", what, len(got), ids(got), len(want), ids(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("%s: entry %d payload is %d bytes (first differs at %d), want %d", what, w.ID, len(g.Payload), firstDiff(g.Payload, w.Payload), len(w.Payload))
		}
		if !g.Time.Equal(w.Time) {
			t.Fatalf("%s: entry %d time %v, want %v", what, w.ID, g.Time, w.Time)
		}
		g.Payload, w.Payload, g.Time, w.Time = nil, nil, time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: entry %d:\n got %+v\nwant %+v", what, w.ID, g, w)
		}
	}
}

func testOutboxFailed(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	kept := threeBatches(t, h)
	before := h.c
	// An audit gap: the whole batch fails, its entries with it.
	h.records(t, 1)
	recs := h.records(t, 2)
	err := h.s.Commit(t.Context(), &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{outboxEntry(recs[0], 0, []byte("gap"))}})
	if !errors.Is(err, engine.ErrAuditGap) {
		t.Fatalf("Commit with an audit gap = %v, want ErrAuditGap", err)
	}
	// A cancelled context.
	h.c = before
	recs = h.records(t, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.s.Commit(ctx, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{outboxEntry(recs[0], 0, []byte("cancelled"))}}); err == nil {
		t.Fatal("Commit with a cancelled context succeeded")
	}
	// An Update whose decide fails.
	if h.s.shared() {
		boom := errors.New("boom")
		err := h.s.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return nil, boom })
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v, want decide's error", err)
		}
	}
	equalEntries(t, "pending after failed commits", pending(t, o, h.member), kept)
	// The chain is where it was: the next batch follows it.
	h.c = before
	recs = h.records(t, 1)
	h.commit(t, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{outboxEntry(recs[0], 0, []byte("next"))}})
	if n := depth(t, o, h.member); n != len(kept)+1 {
		t.Fatalf("OutboxDepth = %d, want %d", n, len(kept)+1)
	}
}

func testOutboxBadID(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	first := h.records(t, 1)
	h.commit(t, &engine.Batch{Audit: first})
	before := h.c
	for name, bad := range map[string]func(recs []engine.AuditRecord) []engine.OutboxEntry{
		"a position before the batch": func(recs []engine.AuditRecord) []engine.OutboxEntry {
			return []engine.OutboxEntry{outboxEntry(first[0], 0, nil)}
		},
		"a position after the batch": func(recs []engine.AuditRecord) []engine.OutboxEntry {
			r := recs[1]
			r.Position++
			return []engine.OutboxEntry{outboxEntry(recs[0], 0, nil), outboxEntry(r, 0, nil)}
		},
		"ids out of order": func(recs []engine.AuditRecord) []engine.OutboxEntry {
			return []engine.OutboxEntry{outboxEntry(recs[1], 0, nil), outboxEntry(recs[0], 0, nil)}
		},
		"one id twice": func(recs []engine.AuditRecord) []engine.OutboxEntry {
			return []engine.OutboxEntry{outboxEntry(recs[0], 1, nil), outboxEntry(recs[0], 1, nil)}
		},
	} {
		h.c = before
		recs := h.records(t, 2)
		err := h.s.Commit(t.Context(), &engine.Batch{Audit: recs, Outbox: bad(recs), Entities: []engine.EntityState{entityState("x", 1)}})
		if !errors.Is(err, engine.ErrOutboxID) {
			t.Fatalf("%s: Commit = %v, want ErrOutboxID", name, err)
		}
	}
	if n := depth(t, o, h.member); n != 0 {
		t.Fatalf("refused batches left %d entries", n)
	}
	if snap := load(t, h.s); snap.AuditHead != before.head || len(snap.Entities) != 0 {
		t.Fatalf("a refused batch was written: head %+v, %d entities", snap.AuditHead, len(snap.Entities))
	}
}

func testOutboxDone(t *testing.T, h *outboxHarness) {
	o := h.ob(t)
	all := threeBatches(t, h)
	done(t, o, h.member, all[0].ID, all[2].ID, 1<<60)
	want := append([]engine.OutboxEntry{all[1]}, all[3:]...)
	equalEntries(t, "pending after done", pending(t, o, h.member), want)
	done(t, o, h.member, all[0].ID, all[2].ID) // again: nothing to do
	done(t, o, h.member)
	equalEntries(t, "pending after done again", pending(t, o, h.member), want)
	if n := depth(t, o, h.member); n != len(want) {
		t.Fatalf("OutboxDepth = %d, want %d", n, len(want))
	}
	done(t, o, h.member, ids(want)...)
	if got := pending(t, o, h.member); len(got) != 0 || depth(t, o, h.member) != 0 {
		t.Fatalf("%d entries pending after all were done", len(got))
	}
	// New entries after an emptied outbox are listed.
	recs := h.records(t, 1)
	e := outboxEntry(recs[0], 0, []byte("after"))
	h.commit(t, &engine.Batch{Audit: recs, Outbox: []engine.OutboxEntry{e}})
	equalEntries(t, "pending after a new batch", pending(t, o, h.member), []engine.OutboxEntry{e})
}
