package consume

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A refusal after a Run's first grant is logged at ERROR naming the
// routes, the filters and the broker's answer, unless every reason given
// passes by itself (WARN).
func TestARefusalIsLoggedNamingTheRoutesAndFilters(t *testing.T) {
	filters := []Filter{{Topic: "incidents/#", QoS: 1, Route: "incidents"}, {Topic: "plant/+/energy", QoS: 1, Route: "meters"},
		{Topic: "plant/+/energy", QoS: 1, Route: "energy"}}
	for _, c := range []struct {
		name    string
		passing []bool // of each refusal added, in the order of filters
		level   string
	}{
		{"a refusal for a reason that does not pass is an ERROR", []bool{false, false}, "level=ERROR"},
		{"refusals that all pass by themselves are a WARN", []bool{true, true}, "level=WARN"},
		{"one refusal that does not pass among passing ones is an ERROR", []bool{true, false}, "level=ERROR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Refusal
			for i, topic := range []string{"$share/g/incidents/#", "$share/g/plant/+/energy"} {
				r.Add(filters, "g", topic, c.passing[i], errors.New(topic+": refused"))
			}
			var log bytes.Buffer
			LogRefusal(slog.New(slog.NewTextHandler(&log, nil)), "tcp://b:1883", r.Done(), 2, time.Second)
			for _, want := range []string{c.level, `routes="[incidents meters energy]"`, `filters="[$share/g/incidents/# $share/g/plant/+/energy]"`,
				`err="$share/g/incidents/#: refused\n$share/g/plant/+/energy: refused"`, "attempt=2", "wait=1s"} {
				if !strings.Contains(log.String(), want) {
					t.Errorf("the log does not say %q:\n%s", want, log.String())
				}
			}
		})
	}
	t.Run("nothing refused is no refusal", func(t *testing.T) {
		if r := new(Refusal).Done(); r != nil {
			t.Fatalf("Done() = %+v, want nil", r)
		}
	})
}
