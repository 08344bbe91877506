package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// FuzzAnExportThatVerifiesShowsWhatTheChainHolds: a file made from an
// export by any change verifies only if each line it holds reads as the
// store's record at that position, both to the decoder and to a reader
// that takes the JSON as it is (jq, a log system: each key as spelled,
// the last of a key given twice, numbers as written). Such a reader may
// find a key of a zero value left out (the decoder read the same zero)
// and a time written otherwise (the same instant, as the hash takes it),
// and nothing else: a change the chain's hashes do not cover is a change
// a reader of the file would see and the verification would not.
func FuzzAnExportThatVerifiesShowsWhatTheChainHolds(f *testing.F) {
	_, lines := exported(f, 5)
	byPosition := map[uint64]engine.AuditRecord{}
	asJSON := map[uint64]any{}
	for _, l := range lines {
		var r engine.AuditRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			f.Fatal(err)
		}
		r.Time = r.Time.UTC()
		byPosition[r.Position], asJSON[r.Position] = r, plainJSON(f, []byte(l))
	}
	text := strings.Join(lines, "\n") + "\n"
	f.Add([]byte(text))
	f.Add([]byte(strings.Join(lines[2:], "\n")))
	f.Add([]byte(strings.Replace(text, `"outcome":"duplicate"`, `"outcome":"applied"`, 1)))
	f.Add([]byte(strings.Replace(text, `"outcome":`, `"Outcome":`, 1)))
	f.Add([]byte(strings.Replace(text, `"dup":false,`, `"dup":false,"note":"x",`, 1)))
	f.Add([]byte(strings.Replace(text, `"dup":false,`, `"dup":false,"dup":true,`, 1)))
	f.Add([]byte(strings.Replace(text, `"value":0.25`, `"value":0.250`, 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, _, err := audit.VerifyJSONLFile(bytes.NewReader(b))
		if err != nil {
			return
		}
		var read uint64
		for l := range bytes.Lines(b) {
			var r engine.AuditRecord
			if err := json.Unmarshal(l, &r); err != nil {
				t.Fatalf("a file that verifies holds a line that is no record: %q: %v", l, err)
			}
			want, ok := byPosition[r.Position]
			if !ok {
				t.Fatalf("a file that verifies holds a record at position %d, which the store never wrote:\n%s", r.Position, l)
			}
			r.Time = r.Time.UTC()
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("a file that verifies reads otherwise than the store's record at position %d:\n%s\nthe store's: %+v", r.Position, l, want)
			}
			if where := shownOtherwise(plainJSON(t, l), asJSON[r.Position], ""); where != "" {
				t.Fatalf("a file that verifies shows a reader of its JSON otherwise than the store's record at position %d, at %s:\n%s", r.Position, where, l)
			}
			read++
		}
		if read != n {
			t.Fatalf("VerifyJSONLFile checked %d records; the file holds %d", n, read)
		}
	})
}

// plainJSON is line as a reader that takes JSON as it is reads it.
func plainJSON(t testing.TB, line []byte) any {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return v
}

// shownOtherwise returns where got, a line as a reader takes it, shows
// what want, the store's line, does not: a key want lacks, a value
// written otherwise (a time: another instant), an array of another
// length. "" when nowhere.
func shownOtherwise(got, want any, at string) string {
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return at
		}
		for k, v := range g {
			wv, ok := w[k]
			if !ok {
				return at + "." + k
			}
			if k == "time" && at == "" {
				gt, gerr := time.Parse(time.RFC3339Nano, fmt.Sprint(v))
				wt, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(wv))
				if gerr != nil || !gt.Equal(wt) {
					return ".time"
				}
				continue
			}
			if where := shownOtherwise(v, wv, at+"."+k); where != "" {
				return where
			}
		}
		return ""
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) != len(g) {
			return at
		}
		for i := range g {
			if where := shownOtherwise(g[i], w[i], fmt.Sprintf("%s[%d]", at, i)); where != "" {
				return where
			}
		}
		return ""
	}
	if !reflect.DeepEqual(got, want) {
		return at
	}
	return ""
}
