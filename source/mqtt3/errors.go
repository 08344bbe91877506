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
	// ErrNoSession is returned by an adopting Run (Config.Adopt) when the
	// broker had no session under the client id: nothing waits for the
	// gone member.
	ErrNoSession = errors.New("mqtt3: the broker has no session under the client id")
	// ErrAdoption is returned by an adopting Run that ended before the
	// session went quiet: no broker answered, the connection was lost (the
	// gone member's return among the causes), the unsubscribe failed, the
	// session still delivered at the timeout, or Run was stopped. What the
	// session holds waits in it.
	ErrAdoption = errors.New("mqtt3: adoption of the session ended before it went quiet")
)
