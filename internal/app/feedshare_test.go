package app

import (
	"slices"
	"testing"

	"github.com/replayguard/replayguard/source/mqtt"
)

// What a member of mqtt.feeds records of its share on a path, and which
// filters an adoption of a gone member's session there unsubscribes.
func TestFeedShareRecordsAndAdoptionFilters(t *testing.T) {
	filters := []mqtt.Filter{
		{Topic: "incidents/#", QoS: 1, Route: "incidents"},
		{Topic: "plant/+/energy", QoS: 1, Route: "meters"},
		{Topic: "spBv1.0/g/NDATA/#", QoS: 1, Unshared: true, Route: "sp"},
		{Topic: "incidents/#", QoS: 1, Route: "again"},
	}
	t.Run("the group's filters are recorded once each, without those not shared", func(t *testing.T) {
		if got, want := sharedTopics(filters), []string{"incidents/#", "plant/+/energy"}; !slices.Equal(got, want) {
			t.Fatalf("sharedTopics = %q, want %q", got, want)
		}
		if got := sharedTopics(nil); got == nil || len(got) != 0 {
			t.Fatalf("sharedTopics(nil) = %#v, want an empty list", got)
		}
	})
	t.Run("the brokers are recorded with their passwords redacted", func(t *testing.T) {
		got := redactedBrokers([]string{"tcp://u:secret@b1:1883", "tcp://b2:1883"})
		if want := []string{"tcp://u:xxxxx@b1:1883", "tcp://b2:1883"}; !slices.Equal(got, want) {
			t.Fatalf("redactedBrokers = %q, want %q", got, want)
		}
	})
	t.Run("an adoption unsubscribes the filters the gone member recorded that this member lacks", func(t *testing.T) {
		got := withRecorded(filters, []string{"plant/+/energy", "old/#", "spBv1.0/g/NDATA/#"})
		want := append(slices.Clone(filters), mqtt.Filter{Topic: "old/#", QoS: 1}, mqtt.Filter{Topic: "spBv1.0/g/NDATA/#", QoS: 1})
		if !slices.Equal(got, want) {
			t.Fatalf("withRecorded = %+v, want %+v", got, want)
		}
		if len(filters) != 4 {
			t.Fatalf("withRecorded changed its argument: %+v", filters)
		}
		if got := withRecorded(filters, nil); !slices.Equal(got, filters) {
			t.Fatalf("withRecorded without a record = %+v, want the member's own %+v", got, filters)
		}
	})
}
