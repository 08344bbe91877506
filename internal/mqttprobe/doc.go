// Package mqttprobe finds out which MQTT version a broker speaks, before
// replayguard run starts the consumer of that version: it sends one
// CONNECT of the version asked (a clean session under a client id of its
// own, so that it leaves no session behind and never touches the
// consumer's), reads the CONNACK, and disconnects.
//
// A broker refuses a version with a CONNACK saying so (MQTT 5 reason code
// 0x84 Unsupported Protocol Version, or the 3.1.1 return code 1
// Unacceptable Protocol Version, which NATS 2.9's MQTT listener sends to an
// MQTT 5 CONNECT before it closes the connection: paho.golang reads that
// as a connection lost, and retried forever), or by closing the connection
// after the CONNECT without any CONNACK. Any other CONNACK, bad credentials
// included, means the broker speaks the version: the consumer then reports
// what it refused.
//
//	v, err := mqttprobe.Negotiate(ctx, brokers, mqttprobe.Auto, opts)
//
// The CONNECT and the CONNACK's first two bytes are written and read here,
// in a few lines, rather than through a client: the answer to probe is one
// that neither paho library reads as a CONNACK of the version it asked for
// (NATS answers MQTT 5 with a 3.1.1 CONNACK), and a reader of whole packets
// would allocate whatever remaining length a non-MQTT listener's first
// bytes happen to spell; this one checks the CONNACK header and its
// length, then reads two bytes.
//
// Negotiate and Probe are safe for concurrent use; they start no goroutine
// that outlives them.
package mqttprobe
