package jetstream_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

func TestSubjectFiltersAgainstTopicFilters(t *testing.T) {
	for _, tc := range []struct {
		name, route, subject string
		covers, meets        bool
	}{
		{"a literal subject is its topic", "plant/m1/energy", "plant.m1.energy", true, true},
		{"'+' takes a '*' token", "plant/+/energy", "plant.*.energy", true, true},
		{"'+' takes one level, not the '>' of any depth", "plant/+/energy", "plant.>", false, true},
		{"'#' takes '>'", "plant/#", "plant.>", true, true},
		{"'#' takes the parent level too", "plant/#", "plant", true, true},
		{"a literal level takes only part of a '*'", "plant/m1/energy", "plant.*.energy", false, true},
		{"another last level takes nothing", "plant/+/energy", "plant.*.water", false, false},
		{"another depth takes nothing", "plant/+/energy", "plant.m1.energy.raw", false, false},
		{"NATS's MQTT escape of '.' is read back", "spBv1.0/g", "spBv1//0.g", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jetstream.TopicCovers(tc.route, tc.subject); got != tc.covers {
				t.Errorf("route %q covers subject %q: %v, want %v", tc.route, tc.subject, got, tc.covers)
			}
			if got := jetstream.TopicMeets(tc.route, tc.subject); got != tc.meets {
				t.Errorf("route %q meets subject %q: %v, want %v", tc.route, tc.subject, got, tc.meets)
			}
		})
	}
}

func TestTheSubjectsTwoFiltersShare(t *testing.T) {
	for _, tc := range []struct{ name, a, b, want string }{
		{"the same filter", "plant.*.energy", "plant.*.energy", "plant.*.energy"},
		{"a narrower one", "plant.>", "plant.*.energy", "plant.*.energy"},
		{"'*' meets a literal", "plant.*.energy", "plant.m1.*", "plant.m1.energy"},
		{"'>' needs a token", "plant.>", "plant", ""},
		{"disjoint", "plant.*.energy", "plant.*.water", ""},
		{"another depth", "plant.*", "plant.*.energy", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jetstream.Intersect(tc.a, tc.b); got != tc.want {
				t.Errorf("Intersect(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
			}
			if got := jetstream.Intersect(tc.b, tc.a); got != tc.want {
				t.Errorf("Intersect(%q, %q) = %q, want %q", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

// logBuffer keeps what a logger wrote, for a test to read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// lostExpected: the test makes the consumer lose messages; else a
	// line telling some fails it.
	lostExpected bool
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// has reports whether a line at level holds every one of parts.
func (l *logBuffer) has(level string, parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.Lines(l.b.String()) {
		if !strings.Contains(line, "level="+level) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// routedConfig is testConfig told the meters route, checking the stream's
// subjects every 20ms, logging into a buffer.
func routedConfig(t *testing.T, url string) (jetstream.Config, *logBuffer) {
	cfg := testConfig(t, url)
	cfg.Routes = []jetstream.Route{{Name: "meters", Topic: "plant/+/energy"}}
	cfg.StreamCheck = 20 * time.Millisecond
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	t.Cleanup(func() {
		if lines := lostLines(logs); len(lines) > 0 && !logs.lostExpected {
			t.Errorf("messages told lost where none were: %q", lines)
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return cfg, logs
}

// A stream subject no route matches is named at the bind: every message of
// it is quarantined as malformed, and the operator learns so before the
// first one.
func TestAStreamSubjectNoRouteMatchesIsWarnedAboutAtTheBind(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.*.energy", "plant.*.water")
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if !logs.has("WARN", "no route matches the stream subject plant.*.water") {
		t.Error("no warning names plant.*.water, which no route matches")
	}
	if logs.has("WARN", "plant.*.energy") {
		t.Error("a warning names plant.*.energy, which the meters route takes whole")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A subject added to the stream while the consumer runs reaches it (it has
// no filter of its own): the change is warned about, naming the subject
// no route matches, and its message is decided malformed — audited and
// quarantined — before it is acknowledged, never acknowledged unrecorded.
func TestASubjectAddedToTheStreamWhileRunningIsWarnedAboutAndItsMessagesQuarantined(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.*.energy")
	e, st := meters(t)
	rec := newRecorder(e)
	cfg, logs := routedConfig(t, n.URL())
	r := start(t, cfg, rec)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)

	n.UpdateStream(testStream, func(c *natsjs.StreamConfig) { c.Subjects = []string{"plant.*.energy", "plant.*.water"} })
	waitFor(t, "the change warned about", 10*time.Second, func() bool {
		return logs.has("WARN", "subjects changed", "added=[plant.*.water]")
	})
	if !logs.has("WARN", "no route matches the stream subject plant.*.water") {
		t.Error("no warning names plant.*.water, added, which no route matches")
	}
	publishAll(t, n, append(readings(2, "m1"), water(1, "m1")...))
	allAcked(t, n, 10*time.Second)
	if got := rec.count(engine.Malformed); got != 1 {
		t.Errorf("%d malformed decisions, want the water reading's 1", got)
	}
	if got := kwh(e, "m1"); got != "2" {
		t.Errorf("meter/m1 kwh = %s, want 2", got)
	}
	var held []engine.QuarantineEntry
	if err := st.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error { held = append(held, q); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].Topic != "plant/m1/water" || !strings.Contains(held[0].Reason, "no route matches") {
		t.Errorf("quarantine holds %+v, want the water reading, no route matching it", held)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestCoverTellsTheSubjectsNoRouteTakesAndTheRoutesNoSubjectFeeds(t *testing.T) {
	routes := []jetstream.Route{{Name: "energy", Topic: "plant/+/energy"}, {Name: "alarm-m1", Topic: "plant/m1/alarm"}, {Name: "power", Topic: "plant/+/power"}}
	for _, c := range []struct {
		name           string
		stream, filter []string
		unrouted, idle []string
		partly         []jetstream.Partly
	}{
		{"every subject routed, every route fed", []string{"plant.*.energy", "plant.*.power", "plant.m1.alarm"}, nil, nil, nil, nil},
		{"a subject no route matches", []string{"plant.*.energy", "plant.*.power", "plant.m1.alarm", "site.>"}, nil, []string{"site.>"}, nil, nil},
		{"a subject the routes match in part", []string{"plant.*.energy", "plant.*.power", "plant.*.alarm"}, nil, nil, nil,
			[]jetstream.Partly{{Subject: "plant.*.alarm", Routes: []string{"alarm-m1"}}}},
		{"a route no subject feeds", []string{"plant.*.energy", "plant.m1.alarm"}, nil, nil, []string{"power"}, nil},
		{"the filter takes part of the stream", []string{"plant.>"}, []string{"plant.*.energy"}, nil, []string{"alarm-m1", "power"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cv := jetstream.Cover(c.stream, c.filter, routes)
			if !slices.Equal(cv.Unrouted, c.unrouted) || !slices.Equal(cv.Idle, c.idle) || fmt.Sprint(cv.Partly) != fmt.Sprint(c.partly) {
				t.Errorf("Cover = unrouted %v, idle %v, partly %v; want %v, %v, %v", cv.Unrouted, cv.Idle, cv.Partly, c.unrouted, c.idle, c.partly)
			}
		})
	}
}
