package sink_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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

// A batch cut short by a crash (the process killed inside its write) ends
// the file with a partial line. The next process's file sink must not glue
// its first record to it: that record would be unreadable, its cursor
// past it. It cuts the partial line off; the batch is written again from
// the cursor.
func TestFileCutsOffAPartialLastLineBeforeAppending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	rec := func(pos uint64) engine.AuditRecord {
		return engine.AuditRecord{Position: pos, Route: "meters", Outcome: "applied", Member: "rg-1"}
	}
	var before []byte
	for pos := uint64(1); pos <= 3; pos++ {
		r := rec(pos)
		line, err := engine.AppendRecordJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if pos < 3 {
			before = append(append(before, line...), '\n')
		} else {
			before = append(before, line[:len(line)/2]...) // killed halfway through record 3
		}
	}
	if err := os.WriteFile(path, before, 0o600); err != nil {
		t.Fatal(err)
	}
	w := sink.NewFile(sink.FileOptions{Path: path})
	defer w.Close(context.Background())
	if err := w.Export(context.Background(), []engine.AuditRecord{rec(3), rec(4)}); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, r := range readLines(t, path) {
		got = append(got, r.Position)
	}
	if !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("the file holds records %v, want 1 2 3 4", got)
	}
}

// A process killed while writing a batch leaves the batch's first records
// as whole lines and the next one cut short; its cursor did not move, so
// the next process writes the batch again from the cursor. The records
// already whole in the file must not stand in it twice; a chain that
// begins again (a new store: the same positions, other hashes) is written
// in full.
func TestFileAfterACrashMidBatchWritesNoRecordTwice(t *testing.T) {
	chain := func(route string) []engine.AuditRecord {
		var head engine.Hash
		recs := make([]engine.AuditRecord, 6)
		for i := range recs {
			recs[i] = engine.AuditRecord{Position: uint64(i + 1), Route: route, Outcome: "applied", Member: "rg-1"}
			if err := engine.Seal(&recs[i], head); err != nil {
				t.Fatal(err)
			}
			head = recs[i].Hash
		}
		return recs
	}
	recs := chain("meters")
	var before []byte
	for i := range 4 { // the batch 1-5, killed halfway through record 4
		line, err := engine.AppendRecordJSON(nil, &recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			before = append(append(before, line...), '\n')
		} else {
			before = append(before, line[:len(line)/2]...)
		}
	}
	for name, tc := range map[string]struct {
		again []engine.AuditRecord
		want  []uint64
	}{
		"the same chain from its cursor": {recs, []uint64{1, 2, 3, 4, 5, 6}},
		"a chain begun again":            {chain("incidents"), []uint64{1, 2, 3, 1, 2, 3, 4, 5, 6}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			if err := os.WriteFile(path, before, 0o600); err != nil {
				t.Fatal(err)
			}
			w := sink.NewFile(sink.FileOptions{Path: path})
			defer w.Close(context.Background())
			if err := w.Export(context.Background(), tc.again); err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, r := range readLines(t, path) {
				got = append(got, r.Position)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the file holds records %v, want %v", got, tc.want)
			}
		})
	}
}
