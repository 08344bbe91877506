package memory_test

import (
	"testing"

	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/store/storetest"
)

// BenchmarkCommit commits batches of 1000 decisions into a full window of
// 100k key entries.
func BenchmarkCommit(b *testing.B) {
	s := memory.New()
	defer s.Close()
	w := storetest.NewWorkload(100_000)
	w.Fill(b, s)
	storetest.BenchCommit(b, s, w)
}

// BenchmarkLoad loads a window of 1M key entries.
func BenchmarkLoad(b *testing.B) {
	s := memory.New()
	defer s.Close()
	storetest.NewWorkload(1_000_000).Fill(b, s)
	storetest.BenchLoad(b, s)
}
