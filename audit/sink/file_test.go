package sink_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

func TestFileRotatesBySizeAndKeepsEveryRecordOfTheKeptFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	r := newRig(t, "file", sink.NewFile(sink.FileOptions{Path: path, MaxBytes: 8 << 10, Keep: 3}))
	r.decide(t, 10)
	r.waitCursor(t, "file", 10)
	first := readLines(t, path) // before any rotation: every record
	if len(first) != 10 || first[0].Position != 1 {
		t.Fatalf("before rotation: %d records", len(first))
	}
	r.decide(t, 400)
	r.waitCursor(t, "file", 410)
	r.stop()

	if _, err := os.Stat(path + ".4"); !os.IsNotExist(err) {
		t.Fatalf("a fourth rotated file exists: %v", err)
	}
	var got []uint64
	for _, p := range []string{path + ".3", path + ".2", path + ".1", path} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 8<<10 {
			t.Fatalf("%s holds %d bytes, above max_bytes", p, st.Size())
		}
		for _, rec := range readLines(t, p) {
			got = append(got, rec.Position)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("positions across the kept files jump from %d to %d", got[i-1], got[i])
		}
	}
	if got[len(got)-1] != 410 || got[0] <= 1 {
		t.Fatalf("kept files hold %d..%d: want the newest up to 410, the oldest rotated away", got[0], got[len(got)-1])
	}
}

// readLines decodes every line of a JSON Lines file, checking each is the
// record's canonical JSON.
func readLines(t *testing.T, path string) []engine.AuditRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []engine.AuditRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec engine.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		canon, _ := engine.AppendRecordJSON(nil, &rec)
		if string(canon) != sc.Text() {
			t.Fatalf("%s: line is not the canonical JSON:\n%s\n%s", path, sc.Text(), canon)
		}
		out = append(out, rec)
	}
	return out
}
