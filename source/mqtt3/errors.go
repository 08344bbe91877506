package mqtt3

import "errors"

// Errors returned by New and Run.
var (
	// ErrConfig is returned by New for an invalid Config. It is permanent:
	// the same configuration fails again.
	ErrConfig = errors.New("mqtt3: invalid configuration")
	// ErrSubscribe is returned by Run when the broker refuses a
	// subscription of the Run's first connection, or grants it at QoS 0. It
	// is permanent: the broker's access control or limits must change
	// first.
	ErrSubscribe = errors.New("mqtt3: subscription refused")
	// ErrRunning is returned by Run while another Run of the same Consumer
	// has not returned.
	ErrRunning = errors.New("mqtt3: consumer already running")
)
