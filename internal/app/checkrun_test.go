package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// TestAKeyWindowShorterThanTheSessionIsWarnedOf: on MQTT 5 the window is
// held to mqtt.session_expiry; on MQTT 3.1.1, whose session lives as long
// as the broker's own setting says, an id route is warned of whatever
// mqtt.session_expiry says, and a sequenced route is not.
func TestAKeyWindowShorterThanTheSessionIsWarnedOf(t *testing.T) {
	const meters = `  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects: [{entity: "meter/{topic[1]}", add: {kwh: kwh}}]
`
	const incidents = `  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    effects: [{entity: "incident/{incident_id}", add: {casualties: casualty_delta}}]
`
	for _, tc := range []struct {
		name, protocol, expiry, ttl, routes string
		want                                string // "" for no warning
	}{
		{"MQTT 5, the window above the session", "5", "1h", "2h", meters, ""},
		{"MQTT 5, the window below the session", "5", "3h", "2h", meters, "shorter than mqtt.session_expiry"},
		{"MQTT 3.1.1, an id route", "3.1.1", "1h", "2h", meters, "persistent_client_expiration"},
		{"MQTT 3.1.1, a sequenced route", "3.1.1", "1h", "2h", incidents, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(`
mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-1, protocol: "`+tc.protocol+`", session_expiry: `+tc.expiry+`}
window: {ttl: `+tc.ttl+`}
routes:
`+tc.routes), "rg.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			if err := checkRun(cfg, slog.New(slog.NewTextHandler(&logged, nil))); err != nil {
				t.Fatal(err)
			}
			got := logged.String()
			if tc.want == "" && strings.Contains(got, "window") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("logged %q; want %q", got, tc.want)
			}
		})
	}
}

// /readyz warns of a member whose clock is a second or more off its store
// server's, either way, and of none measured within it.
func TestClockWarning(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		st   engine.SharedStats
		want string
	}{
		{engine.SharedStats{}, ""},
		{engine.SharedStats{ClockOffset: 5 * time.Second}, ""}, // never measured
		{engine.SharedStats{ClockOffset: 999 * time.Millisecond, ClockMeasured: at}, ""},
		{engine.SharedStats{ClockOffset: -999 * time.Millisecond, ClockMeasured: at}, ""},
		{engine.SharedStats{ClockOffset: 1500 * time.Millisecond, ClockMeasured: at}, "this member's clock is 1.5s off the postgres store server's"},
		{engine.SharedStats{ClockOffset: -90 * time.Second, ClockMeasured: at}, "this member's clock is -1m30s off the postgres store server's"},
	} {
		got := clockWarning("postgres", c.st)
		if c.want == "" && got != "" || c.want != "" && !strings.HasPrefix(got, c.want) {
			t.Errorf("offset %v measured %v: %q, want %q", c.st.ClockOffset, !c.st.ClockMeasured.IsZero(), got, c.want)
		}
	}
}

// /readyz names the store once, whether its error does or not.
func TestStoreNamedOnce(t *testing.T) {
	for msg, want := range map[string]string{
		"postgres store: connect to 127.0.0.1:5432: refused": "postgres store: connect to 127.0.0.1:5432: refused",
		"lease renewal timed out":                            "postgres store: lease renewal timed out",
	} {
		if got := storeNamed("postgres", msg); got != want {
			t.Errorf("storeNamed(%q) = %q, want %q", msg, got, want)
		}
	}
}
