package consume

import "testing"

func TestMatchTopicFollowsTheMQTTRules(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"spBv1.0/plant/+/+", "spBv1.0/plant/NDATA/m1", true},
		{"spBv1.0/plant/+/+", "spBv1.0/plant/NDATA/m1/d", false},
		{"m/+/energy", "m/e1/energy", true},
		{"m/+/energy", "m/e1/power", false},
		{"m/#", "m", true},
		{"m/#", "m/e1/energy", true},
		{"m/+", "m", false},
		{"m", "m/e1", false},
		{"#", "$SYS/broker", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/broker", true},
		{"a//b", "a//b", true},
	} {
		if got := MatchTopic(c.filter, c.topic); got != c.want {
			t.Errorf("MatchTopic(%q, %q) = %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
}
