//go:build !failpoints

package consume

import "time"

// BeforeAck is a fault point between a batch's commit, which landed at
// committed, and its acknowledgements. Built with -tags failpoints, it can
// hold the batch there so that a test's SIGKILL lands in that window;
// otherwise it is nothing.
func BeforeAck(committed time.Time) {}
