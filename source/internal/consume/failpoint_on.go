//go:build failpoints

package consume

import (
	"os"
	"sync"
	"time"
)

// FailpointBeforeAck names the environment variable that, in a binary built
// with -tags failpoints, holds every committed batch this long before its
// acknowledgements are sent (e.g. "20ms"), whichever source runs.
const FailpointBeforeAck = "REPLAYGUARD_FAILPOINT_BEFORE_ACK"

var beforeAckDelay = sync.OnceValue(func() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(FailpointBeforeAck))
	return d
})

// BeforeAck holds the batch for the FailpointBeforeAck delay, if any.
func BeforeAck() {
	if d := beforeAckDelay(); d > 0 {
		time.Sleep(d)
	}
}
