package embedded_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// TestPrefetchAsksForTheBytesOfEveryValue commits key chunks and logged
// rows, then checks the file ranges the store asks the kernel to read as
// it opens: sorted, apart, and each value of the key window and of the row
// log found in the file's own bytes where a range says it lies.
func TestPrefetchAsksForTheBytesOfEveryValue(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, embedded.Options{})
	embedded.SetRowLogMerge(s, 1<<20, 1<<30, 1<<14) // every logged row stays in the log
	for n := range 60 {
		b := rowBatch(n)
		for i := range 300 {
			o := uint64(n*300 + i + 1)
			b.Keys = append(b.Keys, engine.KeyEntry{Ordinal: o, Key: engine.IDKey("r", []string{"s"}, fmt.Sprint(o))})
		}
		b.NextKey = uint64(n*300 + 301)
		if err := s.Commit(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if embedded.LoggedRows(s) == 0 {
		t.Fatal("no row in the log: the test checks nothing of it")
	}
	file, err := os.ReadFile(filepath.Join(dir, embedded.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{"keys", "rowlog"} {
		ranges := embedded.PrefetchRanges(s, bucket)
		for i, r := range ranges {
			if r[0] < 0 || r[1] <= 0 || r[0]+r[1] > int64(len(file)) || (i > 0 && ranges[i-1][0]+ranges[i-1][1] >= r[0]) {
				t.Fatalf("%s: range %d %v out of the file (%d bytes), empty, or not after the one before", bucket, i, r, len(file))
			}
		}
		n := 0
		err := embedded.View(s, func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
				n++
				for _, r := range ranges {
					if bytes.Contains(file[r[0]:r[0]+r[1]], v) {
						return nil
					}
				}
				return fmt.Errorf("%s: value of %x (%d bytes) in no range asked for", bucket, k, len(v))
			})
		})
		if err != nil || n == 0 {
			t.Fatalf("%v (%d values)", err, n)
		}
	}
	// The key window's leaves, found from its branch pages, hold most of
	// its chunks within the two pages each is asked for.
	leaves := embedded.LeafRanges(s, "keys")
	n, in := 0, 0
	err = embedded.View(s, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("keys")).ForEach(func(_, v []byte) error {
			n++
			for _, r := range leaves {
				if bytes.Contains(file[r[0]:r[0]+r[1]], v) {
					in++
					break
				}
			}
			return nil
		})
	})
	if err != nil || in < n*9/10 {
		t.Fatalf("%d of the %d key chunks lie in the leaf pages asked for (%v); want nine in ten at least", in, n, err)
	}
	t.Logf("%d of the %d key chunks lie in the leaf pages asked for", in, n)
}
