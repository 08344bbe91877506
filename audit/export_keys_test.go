package audit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
)

// The hash covers what the decoder reads of a line, and the decoder takes
// a key spelled in another case for its field, keeps the last of a key
// given twice and drops a key it does not know. A line edited so that a
// reader (jq, a person, a log system) sees another outcome or value than
// the one the chain verified, or sees a note no hash covers, is a break at
// its record's position naming the key, never an intact chain.
func TestALineThatShowsAReaderOtherContentThanItsHashCoversIsABreak(t *testing.T) {
	_, lines := exported(t, 6)
	third := lines[2] // position 3: an applied reading, with its effect
	if !strings.Contains(third, `"outcome":"applied"`) || !strings.Contains(third, `"value":0.25`) {
		t.Fatalf("line 3 is not an applied reading with its value: %s", third)
	}
	body := strings.TrimSuffix(third, "}")
	for _, tc := range []struct {
		name, line, want string
	}{
		{"the outcome again, in capitals, after another",
			strings.Replace(body, `"outcome":"applied"`, `"outcome":"duplicate"`, 1) + `,"OUTCOME":"applied"}`,
			`key "OUTCOME" in the record is "outcome" spelled otherwise`},
		{"the outcome twice", `{"outcome":"duplicate",` + third[1:],
			`key "outcome" is given twice in the record`},
		{"the outcome twice, once escaped", `{"outcome":"duplicate",` + strings.Replace(third[1:], `"outcome"`, `"\u006futcome"`, 1),
			`key "outcome" is given twice in the record`},
		{"a key of no field", `{"released_by":"the chief",` + third[1:],
			`key "released_by" in the record is no field of an audit record`},
		{"an effect's value in capitals", strings.Replace(third, `"value":0.25`, `"value":9,"VALUE":0.25`, 1),
			`key "VALUE" in its effects is "value" spelled otherwise`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := append(append(append([]string{}, lines[:2]...), tc.line), lines[3:]...)
			n, err := audit.VerifyJSONL(strings.NewReader(strings.Join(edited, "\n") + "\n"))
			var b *audit.BrokenError
			if !errors.As(err, &b) || b.Position != 3 || !strings.Contains(err.Error(), "line 3: "+tc.want) {
				t.Fatalf("VerifyJSONL = %d, %v; want a break at position 3 saying %q", n, err, "line 3: "+tc.want)
			}
		})
	}
	t.Run("the lines as exported", func(t *testing.T) {
		if n, err := audit.VerifyJSONL(strings.NewReader(strings.Join(lines, "\n") + "\n")); err != nil || n != 6 {
			t.Fatalf("VerifyJSONL = %d, %v; want 6 records", n, err)
		}
	})
}
