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

// BeforeAck holds the batch for the source.FailpointBeforeAck delay, if any.
func BeforeAck() {
	if d := beforeAckDelay(); d > 0 {
		time.Sleep(d)
	}
}
