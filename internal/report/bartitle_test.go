package report_test

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/report"
)

// TestEachBarIsTitledWithItsOwnTime: a bar's title (what a reader hovers)
// names the bucket it counts; bars of seconds, or of a period of days,
// must not share one title.
func TestEachBarIsTitledWithItsOwnTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []time.Duration
	}{
		{"bars of seconds", []time.Duration{time.Second, 3 * time.Second, 5 * time.Second}},
		{"bars of a period of days", []time.Duration{time.Minute, 24*time.Hour + time.Minute, 48*time.Hour + time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t)
			for i, o := range tc.offsets {
				f.at(o, inc(primary, "fire", "e7", int64(i+1), 1))
			}
			var b bytes.Buffer
			if err := report.RenderHTML(&b, f.build(t, report.Options{})); err != nil {
				t.Fatal(err)
			}
			titles := map[string]bool{}
			for _, m := range regexp.MustCompile(`<title>([^<]*)</title></rect>`).FindAllStringSubmatch(b.String(), -1) {
				if titles[m[1]] {
					t.Errorf("two bars titled %q", m[1])
				}
				titles[m[1]] = true
			}
			if len(titles) != len(tc.offsets) {
				t.Fatalf("bars %v, want %d", titles, len(tc.offsets))
			}
		})
	}
}
