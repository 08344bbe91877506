package mqttprobe

import "errors"

var (
	// ErrRefused is returned by Probe when the broker refused the MQTT
	// version: it answered, so it is not down, but not in that version.
	ErrRefused = errors.New("mqttprobe: protocol version refused")
	// ErrUnreachable is returned by Probe when no MQTT answer came: the
	// connection could not be made, or no CONNACK arrived in time. A broker
	// that is down is retried.
	ErrUnreachable = errors.New("mqttprobe: broker unreachable")
	// ErrNotNegotiable is returned by Negotiate when every broker of the
	// list answered and refused every version tried. It is permanent: the
	// configuration must change.
	ErrNotNegotiable = errors.New("no broker accepts the MQTT protocol")
)
