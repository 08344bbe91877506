package embedded_test

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/store/embedded"
)

func TestSinkCursorsSurviveAReopen(t *testing.T) {
	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.Cursor(t.Context(), "siem"); err != nil || c != 0 {
		t.Fatalf("cursor of a sink that never delivered: %d, %v", c, err)
	}
	if err := st.SetCursor(t.Context(), "siem", 42); err != nil {
		t.Fatal(err)
	}
	if err := st.SetCursor(t.Context(), "otel", 7); err != nil {
		t.Fatal(err)
	}
	st.Close()

	ro, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, want := range map[string]uint64{"siem": 42, "otel": 7, "file": 0} {
		if c, err := ro.Cursor(t.Context(), name); err != nil || c != want {
			t.Fatalf("cursor of %s after reopening: %d, %v; want %d", name, c, err, want)
		}
	}
	if err := ro.SetCursor(t.Context(), "siem", 43); !errors.Is(err, embedded.ErrReadOnly) {
		t.Fatalf("SetCursor on a read-only store: %v", err)
	}
}
