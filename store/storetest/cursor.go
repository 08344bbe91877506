package storetest

import (
	"errors"
	"maps"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// testCursors checks Capabilities.Cursors: each sink's cursor is kept by
// its name, across a reopen when the store is durable, and ErrClosed
// after Close.
func testCursors(t *testing.T, p *place) {
	s := p.first(t)
	cs := s.caps.Cursors
	want := map[string]uint64{"siem": 43, "otel": 7, "file": 0}
	check := func(what string, cs engine.CursorStore) {
		t.Helper()
		for name, pos := range want {
			if got, err := cs.Cursor(t.Context(), name); err != nil || got != pos {
				t.Fatalf("%s: cursor of %s = %d, %v; want %d", what, name, got, err, pos)
			}
		}
	}
	if got, err := cs.Cursor(t.Context(), "siem"); err != nil || got != 0 {
		t.Fatalf("cursor of a sink that never delivered: %d, %v", got, err)
	}
	for _, set := range []struct {
		name string
		pos  uint64
	}{{"siem", 42}, {"otel", 7}, {"siem", 43}} {
		if err := cs.SetCursor(t.Context(), set.name, set.pos); err != nil {
			t.Fatalf("SetCursor(%s, %d): %v", set.name, set.pos, err)
		}
	}
	check("after SetCursor", cs)
	if got, err := cs.Cursors(t.Context()); err != nil || !maps.Equal(got, map[string]uint64{"siem": 43, "otel": 7}) {
		t.Fatalf("Cursors = %v, %v; want siem 43, otel 7", got, err)
	}
	if gone, err := cs.ForgetCursor(t.Context(), "otel"); err != nil || !gone {
		t.Fatalf("ForgetCursor(otel) = %v, %v; want true", gone, err)
	}
	if gone, err := cs.ForgetCursor(t.Context(), "otel"); err != nil || gone {
		t.Fatalf("ForgetCursor(otel) again = %v, %v; want false", gone, err)
	}
	want["otel"] = 0
	if got, err := cs.Cursors(t.Context()); err != nil || !maps.Equal(got, map[string]uint64{"siem": 43}) {
		t.Fatalf("Cursors after forgetting otel = %v, %v; want siem 43", got, err)
	}
	if p.f.Durable {
		s = p.reopen(t, s)
		cs = s.caps.Cursors
		check("after reopening", cs)
	}
	closeStore(t, s)
	if _, err := cs.Cursor(t.Context(), "siem"); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Cursor after Close = %v, want ErrClosed", err)
	}
	if err := cs.SetCursor(t.Context(), "siem", 44); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("SetCursor after Close = %v, want ErrClosed", err)
	}
}
