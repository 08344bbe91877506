//go:build failpoints

package mqtt3

import "github.com/replayguard/replayguard/source/internal/consume"

// FailpointBeforeAck names the environment variable that, in a binary built
// with -tags failpoints, holds every committed batch this long before its
// acknowledgements are sent (e.g. "20ms"). Every source reads the same one.
const FailpointBeforeAck = consume.FailpointBeforeAck
