package mqtt3

import "time"

// proved reports whether a connection that held for held, and delivered
// or not, proved the link: its drop is then a failover, and the next round
// over the brokers starts at once. Any other connection is a flap (a
// broker that accepts and drops the client, two consumers with one client
// id taking the session from each other) and the wait before the next
// round grows. MQTT 3.1.1 has no DISCONNECT from the broker, and paho
// does not report PINGRESPs, so only deliveries and time tell.
func proved(held time.Duration, delivered bool, retryMin time.Duration) bool {
	return held >= stableAfter || (delivered && held >= retryMin)
}
