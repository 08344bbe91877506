package embedded_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/storetest"
)

const window = 1_000_000

// filled returns a store directory whose key window holds window entries
// (and as many audit records), written without fsync to save time.
func filled(b *testing.B) (string, *storetest.Workload) {
	b.Helper()
	dir := b.TempDir()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	w := storetest.NewWorkload(window)
	start := time.Now()
	w.Fill(b, s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d decisions in %v", w.Written(), time.Since(start))
	return dir, w
}

// BenchmarkCommit commits batches of 1000 decisions, synced, into a store
// whose key window is full, so every batch also evicts 1000 entries.
func BenchmarkCommit(b *testing.B) {
	dir, w := filled(b)
	start := time.Now()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Logf("opened in %v", time.Since(start))
	storetest.BenchCommit(b, s, w)
}

// BenchmarkLoad loads a window of 1M key entries.
func BenchmarkLoad(b *testing.B) {
	dir, _ := filled(b)
	s, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchLoad(b, s)
}
