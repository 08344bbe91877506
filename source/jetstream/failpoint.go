//go:build !failpoints

package jetstream

// beforeAck is a fault point between a batch's commit and its acks. Built
// with -tags failpoints, it can hold the batch there so that a test's
// SIGKILL lands in that window; otherwise it is nothing.
func beforeAck() {}
