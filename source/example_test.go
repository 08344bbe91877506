package source_test

import (
	"fmt"

	"github.com/replayguard/replayguard/source"
)

// One Observer serves every source: it sees the same events whichever
// protocol delivered.
func ExampleObserverFunc() {
	var received, acked int
	obs := source.ObserverFunc(func(e source.Event) {
		switch e.Kind {
		case source.Received:
			received += e.N
		case source.Acked:
			acked += e.N
		}
	})
	obs.Observe(source.Event{Kind: source.Received, N: 3})
	obs.Observe(source.Event{Kind: source.Acked, N: 2})
	fmt.Printf("received %d, acknowledged %d\n", received, acked)
	// Output: received 3, acknowledged 2
}
