package metrics_test

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
)

// A source counts what it receives; the engine, through the Observer, what
// it decided. What is left is in flight.
func Example() {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "1.0.0", "abc123", "meters")

	m.Received(3)
	m.Committed([]engine.AuditRecord{
		{Route: "meters", Outcome: "applied"},
		{Route: "meters", Outcome: "duplicate"},
	}, nil)

	out, _ := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "replayguard_received_total", "replayguard_in_flight")
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "replayguard_") {
			fmt.Println(line)
		}
	}
	// Output:
	// replayguard_in_flight 1
	// replayguard_received_total 3
}
