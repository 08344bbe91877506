package audit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
)

// TestVerifyJSONLNamesTheLineAnExportIsCutIn: an export whose last line
// ends inside a record was cut short there, and the error says so, naming
// the line and the last record before it; a line in the middle that holds
// no record is named as such; a whole last record without its end of line
// verifies.
func TestVerifyJSONLNamesTheLineAnExportIsCutIn(t *testing.T) {
	_, lines := exported(t, 6)
	text := strings.Join(lines, "\n") + "\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"cut inside the last record", text[:len(text)-40],
			"the file is cut short: its last line, 6, ends inside an audit record (unexpected end of JSON input), after the record at position 5"},
		{"cut inside the first record", lines[0][:30],
			"the file is cut short: its last line, 1, ends inside an audit record (unexpected end of JSON input), before its first record"},
		{"a line in the middle holds no record", strings.Replace(text, lines[2], lines[2][:30], 1),
			"line 3 is not an audit record (unexpected end of JSON input), after the record at position 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := audit.VerifyJSONL(strings.NewReader(tc.text))
			if !errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("VerifyJSONL = %d, %v; want %q", n, err, tc.want)
			}
		})
	}
	t.Run("a whole last record without its end of line", func(t *testing.T) {
		if n, err := audit.VerifyJSONL(strings.NewReader(text[:len(text)-1])); err != nil || n != 6 {
			t.Fatalf("VerifyJSONL = %d, %v; want 6 records", n, err)
		}
	})
}
