package config

import (
	"strings"
	"testing"
)

// A retention interval of a few nanoseconds makes run apply retention back
// to back for ever: measured, an idle run with an empty store and
// interval: 1ns took 79% of a core, against 1% at 1m. Such an interval is
// refused; the shortest taken is 10ms.
func TestARetentionIntervalThatWouldRunBackToBackIsRefused(t *testing.T) {
	for _, tc := range []struct {
		interval string
		refused  bool
	}{
		{"1ns", true}, {"5ms", true}, {"9ms", true},
		{"10ms", false}, {"20ms", false}, {"1m", false},
	} {
		got := problemsOf(t, "audit: {archive: /a, retention: {max_records: 10, interval: "+tc.interval+"}}\n")
		want := "audit.retention.interval: interval " + tc.interval + " is below 10ms: retention would run back to back, a core busy for nothing; the default is 1m"
		switch {
		case tc.refused && (len(got) != 1 || !strings.HasPrefix(got[0], want)):
			t.Errorf("interval %s: problems %q, want %q", tc.interval, got, want)
		case !tc.refused && got != nil:
			t.Errorf("interval %s: problems %q, want none", tc.interval, got)
		}
	}
}
