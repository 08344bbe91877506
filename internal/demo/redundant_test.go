package demo

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The redundant story end to end: path a's primary dies without a
// standby; replayguard, on both paths at once, applies each report once,
// the reports published while a was down from b, while the naive consumer
// fails over to b and applies again what its old session there resends.
func TestRedundantPathsKeepReplayguardExactAndCurrentWhenPathADies(t *testing.T) {
	s := newStoryNamed(StoryRedundant)
	both, downA := len(s.held), len(s.live)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := &watchedWriter{}
	holding := out.when("The dashboard stays up at ")
	opts := fastOptions(t)
	opts.Story, opts.Hold = StoryRedundant, 5*time.Second
	ctx, endHold := context.WithCancel(ctx)
	var audit, served string
	go func() {
		defer endHold()
		select {
		case <-holding:
		case <-ctx.Done():
			return
		}
		audit = fetchAudit(t, out.String())
		served = fetchDashboard(t, out.String(), "api/v1/feeds")
	}()
	res, err := run(ctx, out, opts)
	t.Logf("its output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo --story redundant: %v", err)
	}

	if d := diffs(res.rows, guardOf); d != "" {
		t.Errorf("replayguard's picture differs from the truth: %s", d)
	}
	if got := res.naive["incident/7"]["casualties"]; got != "6" {
		t.Errorf("naive casualties = %s, want 6: path b's old session resent the casualty reports", got)
	}
	if wrongRows(res.rows, naiveOf) == 0 {
		t.Error("the naive picture is right")
	}
	if res.naiveReplays != both || res.applied != both+downA || res.duplicates != both {
		t.Errorf("naive replays %d, replayguard applied %d and suppressed %d; want %d, %d, %d",
			res.naiveReplays, res.applied, res.duplicates, both, both+downA, both)
	}
	wantFeeds := map[string]feedCount{
		feedA: {deliveries: both, first: both},                           // each first report, before a died
		feedB: {deliveries: both + downA, first: downA, duplicate: both}, // the twins, then all while a was down
	}
	for name, want := range wantFeeds {
		if got := res.feeds[name]; got != want {
			t.Errorf("feed %s delivered %+v by the audit records, want %+v", name, got, want)
		}
	}
	if res.auditErr != nil || res.audited != uint64(2*both+downA) {
		t.Errorf("audit verify: %d records, %v; want every delivery's record in an intact chain", res.audited, res.auditErr)
	}
	if res.freshWithin <= 0 || res.freshWithin > stepTimeout {
		t.Errorf("the reports published while a was down were applied within %v of their publication", res.freshWithin)
	}
	// What the dashboard's feed badges show: each path, counted as the
	// audit records count it.
	var feeds struct {
		Feeds []struct {
			Name                          string
			Deliveries, First, Duplicates int
		}
	}
	if err := json.Unmarshal([]byte(served), &feeds); err != nil || len(feeds.Feeds) != 2 {
		t.Errorf("the dashboard's /api/v1/feeds during the hold: %v: %s", err, served)
	}
	for _, f := range feeds.Feeds {
		if got := (feedCount{deliveries: f.Deliveries, first: f.First, duplicate: f.Duplicates}); got != wantFeeds[f.Name] {
			t.Errorf("the dashboard's /api/v1/feeds: feed %s %+v, want %+v", f.Name, got, wantFeeds[f.Name])
		}
	}
	for _, feed := range []string{feedA, feedB} {
		if !regexp.MustCompile(`"feed":\s*"` + feed + `"`).MatchString(audit) {
			t.Errorf("the dashboard's /api/v1/audit names no feed %s during the hold:\n%.2000s", feed, audit)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`incident/7\s+casualties\s+6\s+✗ wrong\s+3\s+3\n`),
		regexp.MustCompile(`replayguard's audit records: feed a 4 first, 0 duplicate; feed b 0 first, 4 duplicate\n`),
		regexp.MustCompile(`naive consumer: fails over to b; its old session there resends 4 reports \(\d with DUP=1\), 4 already applied: applied again\n`),
		regexp.MustCompile(`replayguard never went stale while path a was down: the ` + strconv.Itoa(downA) +
			` reports published then were applied from feed b\n\s+within \d+ ms of their publication\n`),
		regexp.MustCompile(`feed a:\s+4 reports: 4 first, 0 duplicate\n`),
		regexp.MustCompile(`feed b:\s+7 reports: 3 first, 4 duplicate\n`),
		regexp.MustCompile(`none lost while path a was down\n`),
		regexp.MustCompile(`replayguard's is exact\.`),
		regexp.MustCompile(`Audit chain intact: ` + strconv.Itoa(int(res.audited)) + ` records`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output lacks %v", want)
		}
	}
}

// fetchAudit reads /api/v1/audit from the dashboard the output names.
func fetchAudit(t *testing.T, output string) string { return fetchDashboard(t, output, "api/v1/audit") }
