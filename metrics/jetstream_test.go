package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source"
)

// The messages a JetStream consumer tells lost (a purge of messages it had
// not received) are counted.
func TestMessagesTheJetStreamConsumerLostAreCounted(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "1.2.3", "deadbeef", "meters")
	obs := m.JetStream(reg)
	obs.Observe(source.Event{Kind: source.Received, N: 2})
	obs.Observe(source.Event{Kind: source.Lost, N: 5})
	obs.Observe(source.Event{Kind: source.Lost, N: 3})

	want := `
# HELP replayguard_jetstream_lost_total Messages of the JetStream stream never decided that nothing will deliver: removed by a purge or a limit before the consumer received them, passed over by the server, or taken undecided by the stream's deletion (while run consumed it, or, on an embedded or memory store, while it was stopped). An upper bound where jetstream.subjects takes part of the stream; the ERROR log names their stream sequences.
# TYPE replayguard_jetstream_lost_total counter
replayguard_jetstream_lost_total 8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "replayguard_jetstream_lost_total"); err != nil {
		t.Fatal(err)
	}
}
