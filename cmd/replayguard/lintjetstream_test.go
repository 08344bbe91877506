package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// jetStreamLintConfig writes a configuration consuming stream on the
// server at url, filtered by subjects (a YAML list, or "" for none), with
// three routes: energy readings of any meter, alarms of meter m1 only, and
// power readings.
func jetStreamLintConfig(t *testing.T, url, stream, subjects string) string {
	t.Helper()
	filter := ""
	if subjects != "" {
		filter = ", subjects: " + subjects
	}
	cfg := fmt.Sprintf(`input: jetstream
jetstream: {url: %q, stream: %s, consumer: replayguard%s}
store: {kind: memory}
routes:
  - name: energy
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
  - name: alarms
    topic: plant/m1/alarm
    source: ["topic[1]"]
    id: msgId
  - name: power
    topic: plant/+/power
    source: ["topic[1]"]
    id: msgId
`, url, stream, filter)
	path := filepath.Join(t.TempDir(), "replayguard.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lint reads a JetStream stream's subjects from its server, when it can,
// and says what the bind would: a subject the consumer takes that no
// route matches, or that the routes match only in part, and a route that
// matches none of them.
func TestLintChecksTheRoutesAgainstTheJetStreamStreamsSubjects(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream("PLANT", "plant.*.energy", "plant.*.alarm", "site.>")

	t.Run("a subject no route matches, one matched in part, and a route that matches none are warned of", func(t *testing.T) {
		cfg := jetStreamLintConfig(t, n.URL(), "PLANT", "")
		out, errs, code := cli(t, "", "lint", "-c", cfg)
		want := []string{
			cfg + ":2: warning: jetstream.stream: the routes (alarms) match only part of stream PLANT's subject plant.*.alarm, which the consumer takes: a message no route matches is quarantined as malformed (no route matches)",
			cfg + ":2: warning: jetstream.stream: no route matches stream PLANT's subject site.>, which the consumer takes: each of its messages is quarantined as malformed (no route matches); add a route, or narrow jetstream.subjects or the stream",
			cfg + ":14: warning: routes[2] (power).topic: plant/+/power matches none of the subjects of stream PLANT the consumer takes (plant.*.energy, plant.*.alarm, site.>): the route decides nothing",
			cfg + ": ok (3 routes)",
		}
		if code != 0 || errs != "" || !sameLines(out, want) {
			t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0 and:\n%s", code, errs, out, strings.Join(want, "\n"))
		}
	})
	t.Run("the consumer's filter decides what it takes", func(t *testing.T) {
		cfg := jetStreamLintConfig(t, n.URL(), "PLANT", "[plant.*.energy]")
		out, errs, code := cli(t, "", "lint", "-c", cfg)
		want := []string{
			cfg + ":10: warning: routes[1] (alarms).topic: plant/m1/alarm matches none of the subjects of stream PLANT the consumer takes (plant.*.energy): the route decides nothing",
			cfg + ":14: warning: routes[2] (power).topic: plant/+/power matches none of the subjects of stream PLANT the consumer takes (plant.*.energy): the route decides nothing",
			cfg + ": ok (3 routes)",
		}
		if code != 0 || errs != "" || !sameLines(out, want) {
			t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0 and:\n%s", code, errs, out, strings.Join(want, "\n"))
		}
	})
	t.Run("a missing stream is a problem: run refuses it", func(t *testing.T) {
		cfg := jetStreamLintConfig(t, n.URL(), "NOPE", "")
		_, errs, code := cli(t, "", "lint", "-c", cfg)
		want := cfg + `:2: jetstream.stream: jetstream: stream or consumer refused: stream "NOPE" not found on ` + n.URL() + ": run refuses to start until it exists"
		if code != 1 || strings.TrimSpace(errs) != "replayguard lint: "+want {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, want)
		}
	})
	t.Run("an unreachable server skips the check and says what run logs instead", func(t *testing.T) {
		down := testbroker.StartNATS(t, testbroker.NATSOptions{})
		down.Stop()
		out, errs, code := cli(t, "", "lint", "-c", jetStreamLintConfig(t, down.URL(), "PLANT", ""))
		wantNote := "the stream's subjects not checked against the routes: jetstream: server not reachable: " + down.URL() + ": "
		if code != 0 || !strings.Contains(out, wantNote) || !strings.Contains(out, "run's bind logs each subject") ||
			!strings.HasSuffix(out, ": ok (3 routes)\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errs, wantNote)
		}
	})
}

// sameLines reports whether out is exactly the lines want.
func sameLines(out string, want []string) bool {
	return out == strings.Join(want, "\n")+"\n"
}
