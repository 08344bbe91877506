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

// TestAFileWithoutAuditRecordsIsNotAnExport: a file whose first line
// holds no audit record is not an export (ErrNotExport), not a broken
// chain; a line without a position or a hash later in an export is a line
// that holds no record, named with the record before it.
func TestAFileWithoutAuditRecordsIsNotAnExport(t *testing.T) {
	_, lines := exported(t, 4)
	for _, tc := range []struct {
		name, text, want string
		notExport        bool
	}{
		{"a captured feed", `{"topic":"incidents/fd/e1","payload":{"sequence":1}}`,
			`not an audit export: line 1 has no "position"`, true},
		{"an object without a hash", `{"position":1}`, `not an audit export: line 1 has no "hash"`, true},
		{"a number", "7", "not an audit export: line 1 is not an audit record (json: cannot unmarshal number into Go value of type engine.AuditRecord)", true},
		{"a record without a hash in an export", strings.Join([]string{lines[0], lines[1], `{"position":3}`, lines[3]}, "\n"),
			`line 3 is not an audit record (it has no "hash"), after the record at position 2`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _, err := audit.VerifyJSONLFile(strings.NewReader(tc.text + "\n"))
			if err == nil || err.Error() != tc.want || errors.Is(err, audit.ErrNotExport) != tc.notExport || errors.Is(err, audit.ErrBroken) == tc.notExport {
				t.Fatalf("VerifyJSONLFile = %d, %v; want %q (not an export: %v)", n, err, tc.want, tc.notExport)
			}
		})
	}
}
