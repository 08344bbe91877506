//go:build failpoints

package source

// FailpointBeforeAck names the environment variable that, in a binary built
// with -tags failpoints, holds every committed batch this long before its
// acknowledgements are sent (e.g. "20ms"), whichever source runs.
const FailpointBeforeAck = "REPLAYGUARD_FAILPOINT_BEFORE_ACK"
