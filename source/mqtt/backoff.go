package mqtt

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/source/internal/consume"
)

// reconnects decides the wait before each round of connection attempts; a
// round tries every broker of the list in order (autopaho's loop).
//
// The wait depends on what the last connection proved. One that carried
// the broker's traffic (a delivery, or a PINGRESP on a quiet feed) and held
// for at least the shortest wait, b.Min, or that held for stableAfter
// whatever it carried, proved the link: its drop is a failover, and the
// first round starts at once. Any other is a flap, and flaps in a row grow
// the wait before the first round: a link that carried no traffic (a
// broker that accepts and then answers nothing; paho pings as it connects,
// so a live link answers within a round trip), one the broker ended asking
// for a backoff (session taken over, busy, quota, rate), and one shorter
// than b.Min even if it delivered. That last rule is what stops two
// consumers with one client id from taking the session from each other as
// fast as they can connect: Mosquitto 2.0 closes the older connection
// without a DISCONNECT, often after it delivered, so only its length
// tells. With it the side whose connections keep falling backs off to
// ConnectRetryMax while the other keeps the session. Every failed round
// grows the wait too. Every wait is jittered and capped.
type reconnects struct {
	b           consume.Backoff
	stableAfter time.Duration

	// live is set by the first delivery or PINGRESP of a connection, and
	// cleared when the connection is down: paho may hand over deliveries of
	// a resumed session before OnConnectionUp runs. It is on the receive
	// path, so it stays out of mu.
	live atomic.Bool

	mu      sync.Mutex
	flaps   int       // connections in a row that proved nothing
	upAt    time.Time // when the current connection came up
	refused bool      // the broker ended the current connection with a refusal
	round   int       // rounds of the current (re)connection so far
	wait    time.Duration
}

// DISCONNECT reason codes (MQTT 5 §3.14.2.1) that ask for a backoff, with
// sessionTakenOver.
const (
	serverBusy             = 0x89
	quotaExceeded          = 0x97
	connectionRateExceeded = 0x9F
)

// delay is autopaho's ReconnectBackoff, called as each wait starts, before
// round attempt+1 (attempt 0 precedes the first round of a (re)connection).
func (r *reconnects) delay(attempt int) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.round = attempt + 1
	r.wait = r.b.Delay(r.flaps + attempt)
	return r.wait
}

// current returns the round under way and the wait that preceded it.
func (r *reconnects) current() (round int, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.round, r.wait
}

// flapCount is how many connections in a row proved nothing.
func (r *reconnects) flapCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flaps
}

// reset forgets what earlier connections proved: a new Run starts afresh.
func (r *reconnects) reset() {
	r.mu.Lock()
	r.flaps, r.refused, r.round, r.wait = 0, false, 0, 0
	r.live.Store(false)
	r.mu.Unlock()
}

// up notes that a connection came up at now.
func (r *reconnects) up(now time.Time) {
	r.mu.Lock()
	r.upAt = now
	r.mu.Unlock()
}

// traffic notes that the broker delivered a message or answered a ping on
// the current connection. It is cheap: it is called for every delivery.
func (r *reconnects) traffic() {
	if !r.live.Load() {
		r.live.Store(true)
	}
}

// refusedBy notes that the broker ended the current connection with a
// reason that asks the client to back off.
func (r *reconnects) refusedBy() {
	r.mu.Lock()
	r.refused = true
	r.mu.Unlock()
}

// down notes that the current connection dropped at now, and reports how
// long it held and whether it proved the link (the next round then starts
// at once).
func (r *reconnects) down(now time.Time) (held time.Duration, proved bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held = now.Sub(r.upAt)
	proved = consume.Proved(held, r.stableAfter, r.b.Min, r.live.Load() && !r.refused)
	if proved {
		r.flaps = 0
	} else {
		r.flaps = min(r.flaps+1, consume.MaxFlaps)
	}
	r.refused = false
	r.live.Store(false)
	return held, proved
}

// asksBackoff reports whether a broker's DISCONNECT reason code asks the
// client to stay away for a while rather than come straight back: session
// taken over (another connection has the client id), server busy, quota
// exceeded, connection rate exceeded. Others, server shutting down
// included, end a link that may have worked: a failover.
func asksBackoff(reason byte) bool {
	switch reason {
	case sessionTakenOver, serverBusy, quotaExceeded, connectionRateExceeded:
		return true
	}
	return false
}
