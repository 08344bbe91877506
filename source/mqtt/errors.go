package mqtt

import "errors"

// Errors returned by New and Run.
var (
	// ErrConfig is returned by New for an invalid Config. It is permanent:
	// the same configuration fails again.
	ErrConfig = errors.New("mqtt: invalid configuration")
	// ErrSubscribe is returned by Run when the broker refuses a
	// subscription or grants it at QoS 0. It is permanent: the broker's
	// access control or limits must change first.
	ErrSubscribe = errors.New("mqtt: subscription refused")
	// ErrRunning is returned by Run while another Run of the same Consumer
	// has not returned.
	ErrRunning = errors.New("mqtt: consumer already running")
)
