package sparkplug

import "errors"

// Errors of the decoder; each wrapped with the detail.
var (
	// ErrPayload is returned for bytes that are not a Sparkplug B protobuf.
	ErrPayload = errors.New("not a Sparkplug B protobuf payload")
	// ErrValue is returned for a metric value that its datatype or the
	// rules of Sparkplug refuse.
	ErrValue = errors.New("bad metric value")
)
