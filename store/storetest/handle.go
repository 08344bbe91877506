package storetest

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// place is one case's store: how to open it, and what the suite knows of it.
type place struct {
	f    Features
	caps engine.Capabilities // what the probe's store declared
	open Open
	// keyTime is the Time of the fixture keys' ordinal 0. A group's store
	// prunes keys by age: its fixture keys are applied now.
	keyTime int64
}

// handle is one open handle on a place's store, with what it declared
// where it was opened.
type handle struct {
	engine.Store
	p      *place
	caps   engine.Capabilities
	member string // "" on a single-owner store and on a read-only handle
	qbase  uint64 // the member's quarantine base; 0 on a single-owner store
}

func newPlace(f Features, caps engine.Capabilities, open Open) *place {
	p := &place{f: f, caps: caps, open: open, keyTime: 1_700_000_000_000_000_000}
	if f.Members {
		p.keyTime = time.Now().UnixNano()
	}
	return p
}

// handle opens a handle: under member on a group's store, where "" is a
// read-only handle; member is always "" on a single-owner store.
func (p *place) handle(t *testing.T, member string) *handle {
	t.Helper()
	s, err := p.open(member)
	if err != nil {
		t.Fatalf("open member %q: %v", member, err)
	}
	if s == nil {
		t.Fatalf("open member %q returned no store and no error", member)
	}
	h := &handle{Store: s, p: p, caps: s.Capabilities(), member: member}
	checkCapabilities(t, p.f, s, h.caps)
	if sh := h.caps.Shared; sh != nil {
		if got := sh.Member(); got != member {
			t.Fatalf("a handle opened as member %q says it is member %q", member, got)
		}
		h.qbase = sh.QuarantineBase()
	}
	return h
}

// first opens the handle the store-wide cases write through: the store
// itself, or member m1 of a group's store.
func (p *place) first(t *testing.T) *handle {
	t.Helper()
	if p.f.Members {
		return p.handle(t, "m1")
	}
	return p.handle(t, "")
}

// reopen closes h and opens its store again under the same member.
func (p *place) reopen(t *testing.T, h *handle) *handle {
	t.Helper()
	closeStore(t, h)
	return p.handle(t, h.member)
}

// shared reports whether h is a group's store.
func (h *handle) shared() bool { return h.caps.Shared != nil }

// Member, QuarantineBase, Head, Update, Chains and ScanChain are those of
// the handle's declared Shared and Chains.
func (h *handle) Member() string         { return h.member }
func (h *handle) QuarantineBase() uint64 { return h.qbase }
func (h *handle) Head(ctx context.Context) (engine.AuditHead, error) {
	return h.caps.Shared.Head(ctx)
}
func (h *handle) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	return h.caps.Shared.Update(ctx, r, decide)
}
func (h *handle) Chains(ctx context.Context) ([]engine.Chain, error) {
	return h.caps.Chains.Chains(ctx)
}
func (h *handle) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	return h.caps.Chains.ScanChain(ctx, member, from, fn)
}

// chain is a new audit chain of h's member.
func (h *handle) chain() chain { return chain{member: h.member} }

// q is the quarantine id of the record at pos: the position itself on a
// single-owner store, offset by the member's base on a group's.
func (h *handle) q(pos uint64) uint64 { return h.qbase + pos }

// keys returns fixture key entries with ordinals from..to inclusive.
func (h *handle) keys(from, to uint64) []engine.KeyEntry { return keyEntriesAt(h.p.keyTime, from, to) }

// view is snap as h's Load returns it: a group's store leaves Keys to
// Update's reads and NextKey zero (engine.SharedStore).
func (h *handle) view(snap *engine.Snapshot) *engine.Snapshot {
	out := *snap
	if h.shared() {
		out.Keys, out.NextKey = nil, 0
	}
	return normalize(&out)
}

// stateKeys bounds the fixture ordinals readState reads on a group's store.
const stateKeys = 32

// storedKeys returns the keys h holds: on a single-owner store the key
// window Load returns; on a group's store those with ordinals from..to,
// read through Update, in ordinal order.
func (h *handle) storedKeys(t *testing.T, from, to uint64) []engine.KeyEntry {
	t.Helper()
	if !h.shared() {
		return load(t, h).Keys
	}
	r := &engine.Reads{}
	for o := from; o <= to; o++ {
		r.Keys = append(r.Keys, keyHash(o))
	}
	slices.SortFunc(r.Keys, func(a, b engine.Hash) int { return bytes.Compare(a[:], b[:]) })
	var got []engine.KeyEntry
	update(t, h, r, func(rows *engine.Rows) (*engine.Batch, error) {
		got = slices.Clone(rows.Keys)
		return &engine.Batch{}, nil
	})
	slices.SortFunc(got, byOrdinal)
	if len(got) == 0 {
		return nil
	}
	return got
}

// state is everything a store holds, for before/after comparisons. Keys
// and Chains are a group's store's: its keys (ordinals up to stateKeys)
// and every member's chain head.
type state struct {
	Snap       *engine.Snapshot
	Keys       []engine.KeyEntry
	Chains     []engine.Chain
	Audit      []engine.AuditRecord
	Quarantine []engine.QuarantineEntry
}

func readState(t *testing.T, h *handle) state {
	t.Helper()
	st := state{Snap: normalize(load(t, h)), Audit: scanAudit(t, h, 0), Quarantine: scanQuarantine(t, h)}
	if h.shared() {
		st.Keys = h.storedKeys(t, 1, stateKeys)
		cs, err := h.Chains(t.Context())
		if err != nil {
			t.Fatalf("Chains: %v", err)
		}
		if len(cs) > 0 {
			st.Chains = cs
		}
	}
	return st
}

// wantState is the state h should read after writing snap's parts, audit
// and quarantine as its only member.
func (h *handle) wantState(snap *engine.Snapshot, audit []engine.AuditRecord, quarantine []engine.QuarantineEntry) state {
	st := state{Snap: h.view(snap), Audit: audit, Quarantine: quarantine}
	if h.shared() {
		for _, k := range snap.Keys {
			if k.Ordinal <= stateKeys {
				st.Keys = append(st.Keys, k)
			}
		}
		slices.SortFunc(st.Keys, byOrdinal)
		if snap.AuditHead != (engine.AuditHead{}) {
			st.Chains = []engine.Chain{{Member: h.member, Head: snap.AuditHead}}
		}
	}
	return st
}

func load(t *testing.T, s engine.Store) *engine.Snapshot {
	t.Helper()
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if snap == nil {
		t.Fatal("Load returned a nil snapshot")
	}
	return snap
}

func commit(t *testing.T, s engine.Store, b *engine.Batch) {
	t.Helper()
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func update(t *testing.T, h *handle, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) {
	t.Helper()
	if err := h.Update(t.Context(), r, decide); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func scanAudit(t *testing.T, s engine.Store, from uint64) []engine.AuditRecord {
	t.Helper()
	var out []engine.AuditRecord
	err := s.ScanAudit(t.Context(), from, func(r engine.AuditRecord) error {
		out = append(out, normalizeRecord(r))
		return nil
	})
	if err != nil {
		t.Fatalf("ScanAudit(%d): %v", from, err)
	}
	return out
}

func scanQuarantine(t *testing.T, s engine.Store) []engine.QuarantineEntry {
	t.Helper()
	var out []engine.QuarantineEntry
	err := s.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		out = append(out, normalizeEntry(q))
		return nil
	})
	if err != nil {
		t.Fatalf("ScanQuarantine: %v", err)
	}
	if h, ok := s.(*handle); ok {
		s = h.Store
	}
	if c, ok := s.(engine.QuarantineCounter); ok {
		if n, err := c.CountQuarantine(t.Context()); err != nil || n != len(out) {
			t.Fatalf("CountQuarantine = %d, %v; ScanQuarantine listed %d", n, err, len(out))
		}
	}
	return out
}

func closeStore(t *testing.T, s engine.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
