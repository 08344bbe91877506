package sparkplug_test

import (
	"slices"
	"testing"

	"github.com/replayguard/replayguard/sparkplug"
)

func TestARouteSubscribesToTheMessageTypesItDecidesAlone(t *testing.T) {
	each := func(head, tail string) []string {
		var out []string
		for _, typ := range []string{"NBIRTH", "NDATA", "NDEATH", "DBIRTH", "DDATA", "DDEATH"} {
			out = append(out, head+typ+tail)
		}
		return out
	}
	for _, tc := range []struct {
		name, topic string
		want        []string
	}{
		{"a group's filter gives one filter per type under the group", "spBv1.0/plant/#", each("spBv1.0/plant/", "/#")},
		{"the namespace's filter gives one per type under any group", "spBv1.0/#", each("spBv1.0/+/", "/#")},
		{"a wildcard type level is written out, the levels after it kept", "spBv1.0/+/+/line-1/#", each("spBv1.0/+/", "/line-1/#")},
		{"a wildcard type level of an edge's node messages", "spBv1.0/plant/+/line-1", each("spBv1.0/plant/", "/line-1")},
		{"a filter that names its type is kept", "spBv1.0/plant/DDATA/+/+", []string{"spBv1.0/plant/DDATA/+/+"}},
		{"a filter that reaches no type level is kept", "spBv1.0/plant", []string{"spBv1.0/plant"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sparkplug.Subscriptions(tc.topic); !slices.Equal(got, tc.want) {
				t.Fatalf("Subscriptions(%q) = %q, want %q", tc.topic, got, tc.want)
			}
		})
	}
}
