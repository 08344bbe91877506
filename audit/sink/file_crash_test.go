package sink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

// sealedChain returns n records of member's chain, hash-linked from
// position 1.
func sealedChain(t *testing.T, member string, n int) []engine.AuditRecord {
	t.Helper()
	var head engine.Hash
	recs := make([]engine.AuditRecord, n)
	for i := range recs {
		recs[i] = engine.AuditRecord{Position: uint64(i + 1), Route: "meters", Outcome: "applied", Member: member}
		if err := engine.Seal(&recs[i], head); err != nil {
			t.Fatal(err)
		}
		head = recs[i].Hash
	}
	return recs
}

// writeLines writes recs to path as whole JSON lines.
func writeLines(t *testing.T, path string, recs []engine.AuditRecord) {
	t.Helper()
	var b []byte
	for i := range recs {
		line, err := engine.AppendRecordJSON(b, &recs[i])
		if err != nil {
			t.Fatal(err)
		}
		b = append(line, '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// positions lists the records' member:position in the files, oldest first.
func positions(t *testing.T, paths ...string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			continue
		}
		for _, r := range readLines(t, p) {
			out = append(out, fmt.Sprintf("%s:%d", r.Member, r.Position))
		}
	}
	return out
}

// A process killed inside a rotation, once the file was renamed to path.1
// and before the new file received a record, leaves path.1 ending with the
// batch's first records and path absent or empty; its cursor did not move,
// so the next process writes the batch again from the cursor. The records
// already in path.1 must not stand in the files twice.
func TestFileAfterACrashInItsRotationWritesNoRecordTwice(t *testing.T) {
	recs := sealedChain(t, "", 8)
	for name, newFile := range map[string]bool{"the new file not created yet": false, "the new file created, empty": true} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			writeLines(t, path+".1", recs[:5]) // the batch 1-8, rotated after 5
			if newFile {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			w := sink.NewFile(sink.FileOptions{Path: path, MaxBytes: 64 << 10, Keep: 3})
			defer w.Close(context.Background())
			if err := w.Export(context.Background(), recs); err != nil {
				t.Fatal(err)
			}
			got, want := positions(t, path+".1", path), positions(t, path+".1")
			want = append(want, ":6", ":7", ":8")
			if !slices.Equal(got, want) {
				t.Fatalf("path.1 then path hold %v, want %v", got, want)
			}
		})
	}
}

// On a shared store one file receives every member's chain, batch after
// batch. A process killed inside a batch of m2's chain leaves its first
// records in the file; the next process may deliver a batch of another
// chain first (chains go in turn), and only then m2's batch again from its
// cursor. m2's records already in the file must not stand in it twice.
func TestFileAfterACrashWritesNoRecordTwiceWhenAnotherChainComesFirst(t *testing.T) {
	m1, m2 := sealedChain(t, "m1", 2), sealedChain(t, "m2", 6)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeLines(t, path, m2[:3]) // the batch 1-6 of m2, killed after 3
	w := sink.NewFile(sink.FileOptions{Path: path})
	defer w.Close(context.Background())
	for _, batch := range [][]engine.AuditRecord{m1, m2} {
		if err := w.Export(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"m2:1", "m2:2", "m2:3", "m1:1", "m1:2", "m2:4", "m2:5", "m2:6"}
	if got := positions(t, path); !slices.Equal(got, want) {
		t.Fatalf("the file holds %v, want %v", got, want)
	}
}

// Another tool that rotates the file (logrotate's create: rename, then a
// new empty file; or a plain removal) must not leave the sink writing to
// the renamed or removed file, where its records would be lost with it
// once compressed or deleted: the next batch goes to path.
func TestFileMovedAwayByAnotherToolGetsTheNextBatchAtItsPath(t *testing.T) {
	recs := sealedChain(t, "", 6)
	for name, move := range map[string]func(path string) error{
		"renamed, a new file created": func(path string) error {
			if err := os.Rename(path, path+".rotated"); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o600)
		},
		"removed": os.Remove,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			w := sink.NewFile(sink.FileOptions{Path: path})
			defer w.Close(context.Background())
			if err := w.Export(context.Background(), recs[:3]); err != nil {
				t.Fatal(err)
			}
			if err := move(path); err != nil {
				t.Fatal(err)
			}
			if err := w.Export(context.Background(), recs[3:]); err != nil {
				t.Fatal(err)
			}
			if got, want := positions(t, path), []string{":4", ":5", ":6"}; !slices.Equal(got, want) {
				t.Fatalf("path holds %v after the move, want %v", got, want)
			}
		})
	}
}
