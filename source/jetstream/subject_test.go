package jetstream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/source/jetstream"
)

func TestSubjectToTopic(t *testing.T) {
	tests := []struct {
		name, subject, topic string
		why                  string // part of the error, when the subject is refused
	}{
		{"tokens become levels", "plant.m1.energy", "plant/m1/energy", ""},
		{"one token is one level", "alarms", "alarms", ""},
		{"the bridge's lone '/' token is an empty first level", "/.plant.m1", "/plant/m1", ""},
		{"the bridge's lone '/' token is an empty last level", "plant.m1./", "plant/m1/", ""},
		{"the bridge's lone '/' token is an empty inner level", "plant./.m1", "plant//m1", ""},
		{"the bridge's '//' is a '.' in the level", "spBv1//0.group.NDATA.edge", "spBv1.0/group/NDATA/edge", ""},
		{"'////' is two dots", "a.b////c", "a/b..c", ""},
		{"'$' starts a system topic as it does a subject", "$SYS.broker", "$SYS/broker", ""},
		{"a '/' inside a token would split a level", "plant.a/b.energy", "", "not NATS's MQTT escape"},
		{"an odd run of '/' leaves one unescaped", "plant.a///b", "", "not NATS's MQTT escape"},
		{"a trailing '/' inside a token", "plant.m1/", "", "not NATS's MQTT escape"},
		{"'+' is an MQTT wildcard", "plant.+.energy", "", "MQTT wildcard"},
		{"'#' is an MQTT wildcard", "plant.m#1", "", "MQTT wildcard"},
		{"an empty token", "plant..m1", "", "is empty"},
		{"a leading '.'", ".plant", "", "is empty"},
		{"the empty subject", "", "", "empty"},
		{"a lone '/' is no topic", "/", "", "no MQTT topic is empty"},
		{"NUL", "plant.m\x001", "", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jetstream.SubjectToTopic(tt.subject)
			if tt.why != "" {
				if !errors.Is(err, jetstream.ErrSubject) || !strings.Contains(err.Error(), tt.why) {
					t.Fatalf("SubjectToTopic(%q) = %q, %v; want an ErrSubject saying %q", tt.subject, got, err, tt.why)
				}
				return
			}
			if err != nil || got != tt.topic {
				t.Fatalf("SubjectToTopic(%q) = %q, %v; want %q", tt.subject, got, err, tt.topic)
			}
		})
	}
}

// Two different subjects never read as the same topic: the mapping is
// injective on the subjects it accepts, so a route filter or a topic[N]
// value cannot mistake one producer for another.
func TestSubjectToTopicIsInjective(t *testing.T) {
	alphabet := []string{"a", "b", "/", "//", ".", "+"}
	seen := map[string]string{} // topic -> subject
	tried := map[string]bool{}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if prefix != "" && !tried[prefix] {
			tried[prefix] = true
			if topic, err := jetstream.SubjectToTopic(prefix); err == nil {
				if other, dup := seen[topic]; dup {
					t.Fatalf("subjects %q and %q both read as topic %q", other, prefix, topic)
				}
				seen[topic] = prefix
			}
		}
		if depth == 0 {
			return
		}
		for _, s := range alphabet {
			walk(prefix+s, depth-1)
		}
	}
	walk("", 6)
	if len(seen) < 100 {
		t.Fatalf("only %d subjects accepted: the walk checked too little", len(seen))
	}
}

func BenchmarkSubjectToTopic(b *testing.B) {
	for b.Loop() {
		_, _ = jetstream.SubjectToTopic("plant.meter-3.energy")
	}
}
