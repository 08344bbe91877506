package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/source/jetstream"
	"github.com/replayguard/replayguard/source/mqtt"
)

// JetStream returns an observer of the JetStream source that records its
// events in the metrics the MQTT consumer's feed (connections, received,
// commits, acks, abandoned), so that the accounting reads the same
// whichever source runs, and counts its redeliveries in
// replayguard_redelivered_total. It registers that counter on reg.
func (m *Metrics) JetStream(reg prometheus.Registerer) jetstream.Observer {
	redelivered := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replayguard_redelivered_total",
		Help: "Deliveries the server flagged as delivered before (JetStream num_delivered > 1): recorded in the audit's dup field, never trusted.",
	})
	reg.MustRegister(redelivered)
	return jetstream.ObserverFunc(func(e jetstream.Event) {
		if e.Kind == jetstream.Redelivered {
			redelivered.Add(float64(e.N))
			return
		}
		if k, ok := jetStreamKinds[e.Kind]; ok {
			m.Observe(mqtt.Event{Kind: k, Broker: e.Server, N: e.N, Duration: e.Duration, Lag: e.Lag, Err: e.Err})
		}
	})
}

var jetStreamKinds = map[jetstream.EventKind]mqtt.EventKind{
	jetstream.Connected:     mqtt.Connected,
	jetstream.Disconnected:  mqtt.Disconnected,
	jetstream.ConnectFailed: mqtt.ConnectFailed,
	jetstream.Received:      mqtt.Received,
	jetstream.Committed:     mqtt.Committed,
	jetstream.CommitFailed:  mqtt.CommitFailed,
	jetstream.Acked:         mqtt.Acked,
	jetstream.AckDropped:    mqtt.AckDropped,
	jetstream.Abandoned:     mqtt.Abandoned,
}
