package jetstream

import "errors"

// Errors returned by New, Run and StreamSubjects.
var (
	// ErrConfig is returned by New for an invalid Config. It is permanent:
	// the same configuration fails again.
	ErrConfig = errors.New("jetstream: invalid configuration")
	// ErrStream is returned by Run when the stream does not exist, or the
	// server refuses the durable consumer (another consumer of that name
	// with settings that cannot be updated, a push consumer of that name,
	// access denied). It is
	// permanent: the server's streams or permissions must change first.
	ErrStream = errors.New("jetstream: stream or consumer refused")
	// ErrConsumerDeleted is returned by Run when the durable consumer is
	// deleted on the server while Run consumes. Its text says where to
	// create it again: starting again with a Processor that has decided
	// anything refuses to create it (ErrStream), since a new one would
	// deliver the stream from its first message.
	ErrConsumerDeleted = errors.New("jetstream: durable consumer deleted on the server")
	// ErrUnreachable is returned by StreamSubjects when the server cannot
	// be reached, or does not answer in time. It may pass.
	ErrUnreachable = errors.New("jetstream: server not reachable")
	// ErrRunning is returned by Run while another Run of the same Consumer
	// has not returned.
	ErrRunning = errors.New("jetstream: consumer already running")
	// errAnotherClient: another client pulls from a durable consumer
	// that a consumer whose store admits no other member would bind
	// (Config.Alone). It may pass: the bind waits.
	errAnotherClient = errors.New("another client pulls from the durable consumer")
	// ErrSubject is wrapped by SubjectToTopic for a subject that has no
	// unambiguous MQTT topic.
	ErrSubject = errors.New("subject cannot be read as an MQTT topic")
)
