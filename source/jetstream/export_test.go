package jetstream

// The subject and route checks, for the table tests of package
// jetstream_test.
var (
	TopicCovers = topicCovers
	TopicMeets  = topicMeets
	Intersect   = intersect
)

// AckFloor is the consumer's ack floor as it last read it (0: none yet).
func (c *Consumer) AckFloor() uint64 {
	if f := c.ackFloor.Load(); f != nil {
		return f.seq
	}
	return 0
}
