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
	// ErrTakenOver is returned by an adopting Run (Config.Adopt) when the
	// broker gave the session to another connection with its client id:
	// the gone member returned.
	ErrTakenOver = errors.New("mqtt: the session was taken over by another connection")
	// ErrNoSession is returned by an adopting Run when the broker had no
	// session under the client id: nothing waits for the gone member.
	ErrNoSession = errors.New("mqtt: the broker has no session under the client id")
	// ErrAdoption is returned by an adopting Run that ended before the
	// session went quiet: no broker answered, the connection was lost,
	// the unsubscribe failed, the session still delivered at the timeout,
	// or Run was stopped. What the session holds waits in it.
	ErrAdoption = errors.New("mqtt: adoption of the session ended before it went quiet")
)
