package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// testMarks checks Capabilities.Marks: each stream mark is kept by its
// name, the last one set in place of the one before, across a reopen
// when the store is durable, and ErrClosed after Close.
func testMarks(t *testing.T, p *place) {
	s := p.first(t)
	ms := s.caps.Marks
	created := time.Date(2026, 3, 1, 8, 0, 0, 123456789, time.UTC)
	want := map[string]engine.StreamMark{
		"PLANT/replayguard": {Created: created, Decided: 40, End: 52, At: created.Add(time.Hour)},
		"PLANT/other":       {Created: created.Add(time.Minute), Decided: 0, End: 7, At: created.Add(2 * time.Hour), Stopped: true},
	}
	check := func(what string, ms engine.StreamMarks) {
		t.Helper()
		for name, m := range want {
			got, ok, err := ms.StreamMark(t.Context(), name)
			if err != nil || !ok || !got.Created.Equal(m.Created) || !got.At.Equal(m.At) || got.Decided != m.Decided || got.End != m.End || got.Stopped != m.Stopped {
				t.Fatalf("%s: mark %s = %+v, %v, %v; want %+v", what, name, got, ok, err, m)
			}
		}
	}
	if _, ok, err := ms.StreamMark(t.Context(), "PLANT/replayguard"); err != nil || ok {
		t.Fatalf("mark never set: found %v, %v", ok, err)
	}
	if err := ms.SetStreamMark(t.Context(), "PLANT/replayguard", engine.StreamMark{Created: created, Decided: 3, End: 9, At: created}); err != nil {
		t.Fatal(err)
	}
	for name, m := range want {
		if err := ms.SetStreamMark(t.Context(), name, m); err != nil {
			t.Fatalf("SetStreamMark(%s): %v", name, err)
		}
	}
	check("after SetStreamMark", ms)
	if p.f.Durable {
		s = p.reopen(t, s)
		ms = s.caps.Marks
		check("after reopening", ms)
	}
	closeStore(t, s)
	if _, _, err := ms.StreamMark(t.Context(), "PLANT/replayguard"); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("StreamMark after Close = %v, want ErrClosed", err)
	}
	if err := ms.SetStreamMark(t.Context(), "PLANT/replayguard", engine.StreamMark{}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("SetStreamMark after Close = %v, want ErrClosed", err)
	}
}
