//go:build !failpoints

package consume

// BeforeAck is a fault point between a batch's commit and its
// acknowledgements. Built with -tags failpoints, it can hold the batch there
// so that a test's SIGKILL lands in that window; otherwise it is nothing.
func BeforeAck() {}
