package storetest_test

import (
	"fmt"

	"github.com/replayguard/replayguard/store/storetest"
)

// A workload produces batches shaped like the engine's group commits.
func ExampleWorkload() {
	w := storetest.NewWorkload(1500)
	first, second := w.Next(), w.Next()
	fmt.Println(len(first.Audit), "records,", len(first.Keys), "keys,", len(first.Sources), "sources,", len(first.Entities), "entities")
	fmt.Println("second batch evicts below", second.EvictBelow, "and sets NextKey", second.NextKey)
	// Output:
	// 1000 records, 1000 keys, 8 sources, 16 entities
	// second batch evicts below 501 and sets NextKey 2001
}
