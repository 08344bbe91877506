//go:build failpoints

package consume

import (
	"os"
	"sync"
	"time"

	"github.com/replayguard/replayguard/source"
)

var beforeAckDelay = sync.OnceValue(func() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(source.FailpointBeforeAck))
	return d
})

// BeforeAck holds the batch until the source.FailpointBeforeAck delay, if
// any, has passed since its commit landed at committed. (From the commit,
// not from the call: a batch decided while the one before it was held is
// held no longer for that.)
func BeforeAck(committed time.Time) {
	if d := beforeAckDelay(); d > 0 {
		time.Sleep(time.Until(committed.Add(d)))
	}
}
