//go:build failpoints

package mqtt3

import (
	"os"
	"sync"
	"time"
)

// FailpointBeforeAck names the environment variable that, in a binary built
// with -tags failpoints, holds every committed batch this long before its
// acknowledgements are written (e.g. "20ms"). It is the MQTT 5 consumer's
// variable too.
const FailpointBeforeAck = "REPLAYGUARD_FAILPOINT_BEFORE_ACK"

var beforeAckDelay = sync.OnceValue(func() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(FailpointBeforeAck))
	return d
})

func beforeAck() {
	if d := beforeAckDelay(); d > 0 {
		time.Sleep(d)
	}
}
