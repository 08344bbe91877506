package storetest

import (
	"errors"
	"strconv"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The cases of member handles: the lease on a member id, quarantine
// bases, read-only handles, and closing.

func testSharedMemberHeld(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	if _, err := p.open("m1"); !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("second open of a held member id = %v, want ErrMemberHeld", err)
	}
	other := p.handle(t, "m2")
	if other.Member() != "m2" || s.Member() != "m1" {
		t.Fatalf("members %q, %q", s.Member(), other.Member())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := p.handle(t, "m1")
	if again.QuarantineBase() != s.QuarantineBase() {
		t.Fatalf("reopened member has quarantine base %d, was %d", again.QuarantineBase(), s.QuarantineBase())
	}
}

func testSharedQuarantineBase(t *testing.T, p *place) {
	seen := map[uint64]string{}
	for i := range 4 {
		s := p.handle(t, "m"+strconv.Itoa(i))
		base := s.QuarantineBase()
		if base == 0 || base&(1<<40-1) != 0 {
			t.Fatalf("quarantine base %#x leaves no room for positions", base)
		}
		if m, dup := seen[base]; dup {
			t.Fatalf("members %s and %s share quarantine base %#x", m, s.Member(), base)
		}
		seen[base] = s.Member()
	}
}

func testSharedReadOnly(t *testing.T, p *place) {
	w := p.handle(t, "m1")
	var c chain
	commit(t, w, &engine.Batch{Entities: []engine.EntityState{entityState("incident/7", 3)}, Audit: memberRecords(t, &c, "m1", 2)})
	ro := p.handle(t, "")
	snap := load(t, ro)
	if len(snap.Entities) != 1 || snap.AuditHead != (engine.AuditHead{}) {
		t.Fatalf("read-only Load = %+v", snap)
	}
	if cs, err := ro.Chains(t.Context()); err != nil || len(cs) != 1 || cs[0].Head != c.head {
		t.Fatalf("read-only Chains = %+v, %v", cs, err)
	}
	if err := ro.Commit(t.Context(), &engine.Batch{Entities: []engine.EntityState{entityState("x", 1)}}); err == nil {
		t.Fatal("a read-only handle committed")
	}
	if err := ro.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil }); err == nil {
		t.Fatal("a read-only handle updated")
	}
}

func testSharedClosed(t *testing.T, p *place) {
	s := p.handle(t, "m1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"Load":   func() error { _, err := s.Load(ctx); return err }(),
		"Head":   func() error { _, err := s.Head(ctx); return err }(),
		"Commit": s.Commit(ctx, &engine.Batch{}),
		"Update": s.Update(ctx, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return &engine.Batch{}, nil }),
		"Scan":   s.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { return nil }),
		"Chains": func() error { _, err := s.Chains(ctx); return err }(),
		"Close":  s.Close(),
	} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// The engine tests below run engines on member handles, as a group does.
