package jetstream

// The subject and route checks, for the table tests of package
// jetstream_test.
var (
	TopicCovers = topicCovers
	TopicMeets  = topicMeets
	Intersect   = intersect
)
