// Package mqttconn dials the MQTT brokers replayguard talks to over TCP or
// TLS, for the MQTT consumers (source/mqtt, source/mqtt3) and the MQTT
// output (forward): which broker URLs are dialled directly (Dialable,
// IsTLS, DialsItself), the TLS-or-TCP dial (Dial), and the consumers'
// connection (DialBuffered, Conn), which reads through a buffer and, once
// its Leaving is set, closes gracefully: it half-closes and waits for the
// broker to close its side, so that the broker has read every
// acknowledgement before a consumer started again takes the session over.
// It imports no other package of replayguard.
//
//	var leave mqttconn.Leaving
//	dial := func(ctx context.Context, u *url.URL) (net.Conn, error) {
//		c, err := mqttconn.DialBuffered(ctx, u, tlsCfg, connectTimeout, &leave)
//		if err != nil {
//			return nil, err // not a nil *Conn in a non-nil net.Conn
//		}
//		return c, nil
//	}
//	// ... consume; then, before the DISCONNECT:
//	leave.Set(time.Now().Add(shutdownTimeout))
//
// Concurrency: the functions and Leaving are safe for concurrent use; a
// Conn is read from one goroutine at a time, and its Close may run
// concurrently with a Read, which it takes over.
package mqttconn
