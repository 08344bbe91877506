package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/replayguard/replayguard/engine"
	aar "github.com/replayguard/replayguard/internal/report"
)

// redundantConfig is replayguard's configuration in the redundant story:
// the incident story's route without its forward effect, on the embedded
// store, consuming two broker paths at once, each its own persistent
// session (demo-replayguard-a, demo-replayguard-b).
const redundantConfig = `
store: {kind: embedded, path: '${DEMO_STORE}'}
mqtt:
  client_id: demo-replayguard
  session_expiry: 1h
  feeds:
    - {name: a, brokers: ['${DEMO_PATH_A_LINK}']}
    - {name: b, brokers: ['${DEMO_PATH_B_LINK}']}
` + incidentRoutes

// The redundant story's feeds, as its configuration names them.
const (
	feedA = "a"
	feedB = "b"
)

// newRedundantStory is the structure fire on two paths: its first four
// reports published to both while both are up, the rest to path b alone
// once path a's primary has died.
func newRedundantStory() story {
	s := newIncidentStory()
	s.name, s.config, s.clean, s.paths = StoryRedundant, redundantConfig, false, true
	s.title = "replayguard demo --story redundant: a structure fire on two broker paths at once, and one of them dies"
	s.link = "dispatch links"
	s.pictureTitle = "The common operating picture after path a died:"
	s.lineage = "" // its suppressed copies are twins from the other path, not replays: the feed counts tell them
	s.live = append(s.live, s.after...)
	s.after = nil
	s.summary = redundantSummary
	return s
}

// introducePaths tells what the redundant story runs on.
func (d *demo) introducePaths(links []string) {
	d.out.plain("  path a           %s   mochi-mqtt: a primary, no standby at all", d.primary.URL())
	d.out.plain("  path b           %s   mochi-mqtt: a broker of its own", d.pathB.URL())
	d.out.plain("  field gateway    publishes each report to a, then to b, at QoS 1")
	d.out.plain("  naive consumer   %q applies every delivery, from one path at a time:", naiveClientID)
	d.out.plain("                   its broker list is a, then b")
	d.out.plain("  replayguard      consumes both paths at once (mqtt.feeds): feed %s as %q, feed %s as %q;",
		feedA, d.guard.feeds[0].clientID, feedB, d.guard.feeds[1].clientID)
	d.out.plain("                   a report's copy from the other path is decided duplicate")
	d.out.plain("  dispatch links   both consumers reach a through %s and b through %s\n", links[0], links[1])
}

// feedCount is what one feed delivered, by replayguard's decisions.
type feedCount struct {
	deliveries int
	first      int // applied or applied late: the feed delivered the message first
	duplicate  int
}

// feedCounts counts replayguard's audit records by the feed they name.
func (d *demo) feedCounts(ctx context.Context) (map[string]feedCount, error) {
	out := map[string]feedCount{}
	err := d.eachRecord(ctx, func(r engine.AuditRecord) {
		if r.Feed == "" {
			return
		}
		c := out[r.Feed]
		c.deliveries++
		switch r.Outcome {
		case "applied", "applied_late":
			c.first++
		case "duplicate":
			c.duplicate++
		}
		out[r.Feed] = c
	})
	return out, err
}

// eachRecord passes replayguard's audit records to fn in order.
func (d *demo) eachRecord(ctx context.Context, fn func(engine.AuditRecord)) error {
	for r, err := range aar.Records(ctx, d.guard.store, nil) {
		if err != nil {
			return err
		}
		fn(r)
	}
	return nil
}

// sayFeeds tells what each feed delivered so far, from the audit records.
func (d *demo) sayFeeds(ctx context.Context, lead string) error {
	counts, err := d.feedCounts(ctx)
	if err != nil {
		return err
	}
	d.out.say("%s%s", lead, describeFeeds(counts))
	return nil
}

// describeFeeds lists each feed's firsts and duplicates: "feed a 4 first,
// 0 duplicate; feed b 0 first, 4 duplicate".
func describeFeeds(counts map[string]feedCount) string {
	var parts []string
	for _, name := range []string{feedA, feedB} {
		c := counts[name]
		parts = append(parts, fmt.Sprintf("feed %s %d first, %d duplicate", name, c.first, c.duplicate))
	}
	return strings.Join(parts, "; ")
}

// redundantSummary tells, after the table, what each consumer and each of
// replayguard's feeds was delivered.
func redundantSummary(d *demo, res *result) {
	n, g := d.naiveT.total(), d.guardT.total()
	noun := d.story.noun
	d.out.plain("  naive consumer: %s delivered, %d of them replays it applied again (b's resend of its old session)",
		plural(n.deliveries, noun), n.replays)
	d.out.plain("  replayguard:    %s delivered on two paths: %d applied, %d duplicate", plural(g.deliveries, noun),
		res.applied, res.duplicates)
	if res.feedsErr != nil {
		d.out.plain("                  its audit records could not be read: %v", res.feedsErr)
		return
	}
	for _, name := range []string{feedA, feedB} {
		c := res.feeds[name]
		d.out.plain("    feed %s:       %s: %d first, %d duplicate", name, plural(c.deliveries, noun), c.first, c.duplicate)
	}
	d.out.plain("                  (its audit records, each naming its feed; replayguard_feed_first_total and")
	d.out.plain("                  replayguard_feed_duplicates_total count the same)")
	if diffs(res.rows, guardOf) == "" && res.applied == len(d.story.all()) {
		d.out.plain("  each report applied once, from the path that delivered it first; none lost while path a was down")
	}
}

// bothPaths is nil when replayguard's audit records name both feeds: it
// consumed both paths.
func (r *result) bothPaths() error {
	if r.feedsErr != nil {
		return fmt.Errorf("%w: %w", ErrAudit, r.feedsErr)
	}
	for _, name := range []string{feedA, feedB} {
		if r.feeds[name].deliveries == 0 {
			return fmt.Errorf("%w: no audit record names feed %s", ErrOnePath, name)
		}
	}
	return nil
}
