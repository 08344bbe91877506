package jetstream_test

import (
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

// A route that matches none of the stream's subjects the consumer takes
// decides nothing: the bind warns of it, as lint does, and so does the
// subject check when a change of the stream's subjects leaves a route
// with none; a route that still matches one is not warned of.
func TestARouteNoStreamSubjectFeedsIsWarnedAboutAtTheBindAndWhenTheSubjectsChange(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.*.energy", "plant.*.alarm")
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	cfg.Routes = append(cfg.Routes, jetstream.Route{Name: "alarms", Topic: "plant/+/alarm"}, jetstream.Route{Name: "power", Topic: "plant/+/power"})
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if !logs.has("WARN", "route power (plant/+/power) matches none of the stream subjects the consumer takes", "when=bind") {
		t.Error("no warning at the bind names the power route, which no subject of the stream feeds")
	}
	for _, route := range []string{"route meters", "route alarms"} {
		if logs.has("WARN", route) {
			t.Errorf("a warning names %s, which a subject of the stream feeds", route)
		}
	}

	n.UpdateStream(testStream, func(c *natsjs.StreamConfig) { c.Subjects = []string{"plant.*.energy"} })
	waitFor(t, "the change warned about", 10*time.Second, func() bool {
		return logs.has("WARN", "subjects changed", "removed=[plant.*.alarm]")
	})
	if !logs.has("WARN", "route alarms (plant/+/alarm) matches none of the stream subjects the consumer takes", "when=\"stream subjects changed\"") {
		t.Error("no warning names the alarms route, which the stream's subjects no longer feed")
	}
	if logs.has("WARN", "route meters") {
		t.Error("a warning names the meters route, which plant.*.energy still feeds")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
