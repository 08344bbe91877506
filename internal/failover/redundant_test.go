package failover

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestRedundantFeeds consumes two redundant broker paths at once (mqtt.feeds
// a and b, one Mosquitto primary each, with a standby port behind it) into
// one `replayguard run` on the embedded store, while one producer publishes
// every message to both paths over two connections. Each path in turn
// fails over to a standby started from a snapshot of its primary older than
// the consumer's acknowledgements: the standby replays messages already
// applied and has lost messages its primary acknowledged to the producer
// and never delivered on that path. Between the failovers the consumer is
// killed with SIGKILL and started again, twice.
//
// Each message was held by at least one path, so none may be missing: the
// entity state must equal what the distinct messages add up to, with no
// gap; no message applied twice; every record names the feed that
// delivered it, through one of that feed's brokers. The messages a path
// lost come from the other one; those published while a path is down are
// applied through the other within a few seconds, before the standby is
// up; the standby's replays are found duplicate on its own feed.
func TestRedundantFeeds(t *testing.T) {
	skipShort(t)
	const part, replayed, lost, whileDown = 200, 100, 100, 50
	sources := sourceNames(3)
	a, b := startPath(t, "a"), startPath(t, "b")
	paths := []*path{a, b}
	s := newFeedsSetup(t, paths)
	d := startDaemon(t, s)
	waitFeedsReady(t, d)
	tw := &twin{t: t, paths: paths, sources: sources}
	for _, p := range paths {
		p.pub = newPublisher(t, p.brokers(), 20)
	}

	var head uint64 // the audit position when the last run started
	crash := func() {
		d.Kill()
		head, _, _ = inspect(t, s)
		d.Start()
		waitFeedsReady(t, d)
	}

	tw.publish(part)
	foA := failOver(t, d, tw, a, b, replayed, lost, whileDown)
	tw.publish(part)
	crash()
	foB := failOver(t, d, tw, b, a, replayed, lost, whileDown)
	tw.publish(part)
	crash()
	tw.publish(part)
	d.WaitHigh(lastSequences(a.pub))
	waitStable(t, "the audit position", time.Second, 30*time.Second, d.Position)
	checkFinalRun(t, d, head)
	final := feedMetrics(t, d)
	d.Stop()

	r := verifyStore(t, openStore(t, s), a.pub, sources)
	checkCLI(t, d, r)
	r.checkReplays(t, true)
	checkRedundant(t, r, tw)
	checkFinalFeedMetrics(t, r, head, final)
	for _, fo := range []failover{foA, foB} {
		checkFailover(t, r, fo, sources)
	}
}

// path is one redundant broker path: a primary and the port of the standby
// that takes over from it, and the producer's connection to it.
type path struct {
	name        string
	primary     *testbroker.Mosquitto
	standbyPort int
	pub         *testbroker.Publisher
	down        bool // between the primary's kill and the standby's start
}

// startPath starts a path's primary and picks its standby's port.
func startPath(t *testing.T, name string) *path {
	return &path{name: name, primary: testbroker.StartMosquitto(t, testbroker.MosquittoOptions{}),
		standbyPort: testbroker.FreePort(t)}
}

func (p *path) standbyURL() string { return fmt.Sprintf("tcp://127.0.0.1:%d", p.standbyPort) }

// brokers are the path's brokers in failover order.
func (p *path) brokers() []string { return []string{p.primary.URL(), p.standbyURL()} }

// newFeedsSetup writes the failover tests' configuration with mqtt.feeds,
// one feed per path, in place of mqtt.brokers.
func newFeedsSetup(t *testing.T, paths []*path) *setup {
	t.Helper()
	feeds := map[string][]string{}
	for _, p := range paths {
		feeds[p.name] = p.brokers()
	}
	// A receive maximum (group_test.go's) below the lost part: the primary
	// sends the frozen consumer that many and queues the rest.
	return feedsSetup(t, feeds, setupOptions{API: true, ReceiveMaximum: receiveMaximum})
}

// feedsSetup writes the failover tests' configuration with o and
// mqtt.feeds (name → brokers, in name order) in place of mqtt.brokers.
func feedsSetup(tb testing.TB, feeds map[string][]string, o setupOptions) *setup {
	tb.Helper()
	const placeholder = "tcp://127.0.0.1:1"
	s := newSetupWith(tb, []string{placeholder}, o)
	text, err := os.ReadFile(s.Path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := "  feeds:\n"
	for _, name := range slices.Sorted(maps.Keys(feeds)) {
		lines += fmt.Sprintf("    - {name: %s, brokers: [%s]}\n", name, strings.Join(feeds[name], ", "))
	}
	out := strings.Replace(string(text), "  brokers: ["+placeholder+"]\n", lines, 1)
	if out == string(text) {
		tb.Fatalf("no mqtt.brokers line to replace in:\n%s", text)
	}
	if err := os.WriteFile(s.Path, []byte(out), 0o600); err != nil {
		tb.Fatal(err)
	}
	if s.Config, err = config.Load(s.Path); err != nil {
		tb.Fatalf("configuration:\n%s\n%v", out, err)
	}
	if err := s.Config.ValidateRun(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// span is the sequences [from, to] that one publish gave every source.
type span struct{ from, to int64 }

func (s span) keys(sources []string) []seqKey {
	var out []seqKey
	for _, src := range sources {
		for seq := s.from; seq <= s.to; seq++ {
			out = append(out, seqKey{src, seq})
		}
	}
	return out
}

// twin is the producer: it publishes each message to every path, over
// each path's own connection, so that the sequences of all publishers stay
// the same.
type twin struct {
	t       *testing.T
	paths   []*path
	sources []string
	last    int64
}

// publish sends the next n sequences of every source to all paths at once
// and fails the test unless each path that is up acknowledged them all and
// each path that is down none.
func (tw *twin) publish(n int) span {
	tw.t.Helper()
	got := make([]int, len(tw.paths))
	var wg sync.WaitGroup
	for i, p := range tw.paths {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if !p.down && p.pub.AwaitConnection(ctx) != nil {
				return
			}
			for _, src := range tw.sources {
				got[i] += p.pub.Publish(ctx, src, n)
			}
		})
	}
	wg.Wait()
	for i, p := range tw.paths {
		if want := n * len(tw.sources); !p.down && got[i] != want {
			tw.t.Fatalf("path %s acknowledged %d of %d publishes", p.name, got[i], want)
		} else if p.down && got[i] != 0 {
			tw.t.Fatalf("path %s is down, yet acknowledged %d publishes", p.name, got[i])
		}
	}
	sp := span{tw.last + 1, tw.last + int64(n)}
	tw.last = sp.to
	return sp
}

// failover is what one path's failover published, for checkFailover.
type failover struct {
	path, other string
	standby     string // the standby's URL
	replayed    span   // in the standby's snapshot: applied, then replayed
	lost        span   // acknowledged by the primary after the snapshot, then lost with it
	whileDown   span   // published while the path had no broker
	// downFrom and downTo are the audit positions before and after the
	// decisions on whileDown.
	downFrom, downTo uint64
}

// failOver fails p over to a standby started from a snapshot of its
// primary that predates acknowledgements, while other carries the feed:
//
//  1. with the consumer frozen (SIGSTOP), replayed is published and the
//     primary's next autosave copied: the copy holds replayed in the
//     feed's session, unacknowledged; the consumer resumes and applies it;
//  2. frozen again, lost is published: the primary acknowledges it to the
//     producer, sends the feed at most its in-flight window and queues the
//     rest; the primary is killed (SIGKILL) and the consumer resumed;
//  3. whileDown is published, to other only: it must be applied within a
//     few seconds, through other, while /readyz stays 200 and names p;
//  4. the standby starts from the copy on p's second port and replays all
//     of replayed, which the consumer must find duplicate on p's feed.
func failOver(t *testing.T, d *daemon, tw *twin, p, other *path, replayed, lost, whileDown int) failover {
	t.Helper()
	fo := failover{path: p.name, other: other.name, standby: p.standbyURL()}
	freeze(t, d)
	fo.replayed = tw.publish(replayed)
	snap := p.primary.SnapshotDB()
	d.Resume()
	waitApplied(t, d, "the snapshot's messages", tw.sources, fo.replayed.to, 30*time.Second)

	freeze(t, d)
	fo.lost = tw.publish(lost)
	p.primary.Kill()
	p.down = true
	d.Resume()
	waitApplied(t, d, "the messages the primary lost", tw.sources, fo.lost.to, 30*time.Second)
	waitFor(t, "/readyz naming feed "+p.name, 10*time.Second, func() bool {
		ready, warning := readiness(d)
		return ready && strings.Contains(warning, "feed "+p.name)
	})
	waitCommitted(t, d)
	before, from := feedMetrics(t, d), d.Position()

	published := time.Now()
	fo.whileDown = tw.publish(whileDown)
	waitApplied(t, d, "the messages published while path "+p.name+" is down", tw.sources, fo.whileDown.to, 5*time.Second)
	t.Logf("path %s down: %d messages applied through %s within %v of their first publish",
		p.name, len(fo.whileDown.keys(tw.sources)), other.name, time.Since(published).Round(time.Millisecond))
	if ready, warning := readiness(d); !ready || !strings.Contains(warning, "feed "+p.name) {
		t.Errorf("/readyz with path %s down: ready %v, warning %q", p.name, ready, warning)
	}
	waitCommitted(t, d)
	mid, to := feedMetrics(t, d), d.Position()
	fo.downFrom, fo.downTo = from, to
	if got, want := mid[feedFirst+"/"+other.name]-before[feedFirst+"/"+other.name], float64(whileDown*len(tw.sources)); got != want {
		t.Errorf("%s went from %v to %v: %v firsts of feed %s while %s was down, want %v",
			feedFirst, before[feedFirst+"/"+other.name], mid[feedFirst+"/"+other.name], got, other.name, p.name, want)
	}
	if mid[feedConnected+"/"+p.name] != 0 || mid[feedConnected+"/"+other.name] != 1 {
		t.Errorf("%s: %s %v, %s %v while %s was down", feedConnected, p.name, mid[feedConnected+"/"+p.name],
			other.name, mid[feedConnected+"/"+other.name], p.name)
	}

	testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: p.standbyPort})
	p.down = false
	want := mid[feedDuplicates+"/"+p.name] + float64(replayed*len(tw.sources))
	waitFor(t, fmt.Sprintf("the standby of path %s replaying %d messages", p.name, replayed*len(tw.sources)),
		30*time.Second, func() bool { return feedMetrics(t, d)[feedDuplicates+"/"+p.name] >= want })
	waitFeedsReady(t, d)
	t.Logf("path %s failed over to %s: its replays found duplicate", p.name, fo.standby)
	return fo
}

// freeze pauses the daemon (SIGSTOP) and waits until it is stopped, so
// that it reads nothing more.
func freeze(t *testing.T, d *daemon) {
	t.Helper()
	d.Pause()
	stat := fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid)
	waitFor(t, "replayguard run stopped", 5*time.Second, func() bool {
		b, _ := os.ReadFile(stat) // pid (comm) state …
		i := bytes.LastIndexByte(b, ')')
		return i > 0 && len(b) > i+2 && b[i+2] == 'T'
	})
}

// readiness returns whether /readyz answers 200, and its warning.
func readiness(d *daemon) (bool, string) {
	resp, err := d.client.Get(d.url("/readyz"))
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	var body struct {
		Warning string `json:"warning"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode == http.StatusOK, body.Warning
}

// waitFeedsReady waits until every feed is connected, subscribed and
// committing: /readyz is 200 and names no feed that is down.
func waitFeedsReady(t testing.TB, d *daemon) {
	t.Helper()
	waitFor(t, "every feed ready", 30*time.Second, func() bool {
		ready, warning := readiness(d)
		return ready && warning == ""
	})
}

// waitCommitted waits until every delivery the daemon received has been
// committed (the engine decides ahead of its commits, and the API shows
// the decisions): the metrics and the audit position then agree with what
// /api/v1/sources showed.
func waitCommitted(t *testing.T, d *daemon) {
	t.Helper()
	waitFor(t, "every delivery committed", 10*time.Second, func() bool {
		m := d.Metrics()
		return m["replayguard_received_total"] == m["replayguard_decisions_total"] && m["replayguard_in_flight"] == 0
	})
}

// waitApplied waits until every source is applied up to seq with no gap
// open, as /api/v1/sources shows it (decided, maybe not yet committed).
func waitApplied(t *testing.T, d *daemon, what string, sources []string, seq int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, what+" applied", timeout, func() bool {
		var reports []engine.SourceReport
		d.getJSON("/api/v1/sources", &reports)
		return len(reports) == len(sources) && !slices.ContainsFunc(reports, func(r engine.SourceReport) bool {
			return r.High < seq || len(r.Gaps) > 0
		})
	})
}

const (
	feedDeliveries = "replayguard_feed_deliveries_total"
	feedConnected  = "replayguard_feed_connected"
	feedFirst      = "replayguard_feed_first_total"
	feedDuplicates = "replayguard_feed_duplicates_total"
)

var feedSample = regexp.MustCompile(`^(replayguard_feed_[a-z_]+)\{feed="([^"]*)"\} (\S+)$`)

// feedMetrics returns the daemon's per-feed samples as NAME/FEED, and
// replayguard_received_total (daemon.Metrics leaves labelled series out).
func feedMetrics(t *testing.T, d *daemon) map[string]float64 {
	t.Helper()
	resp, err := d.client.Get(d.url("/metrics"))
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if m := feedSample.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			out[m[1]+"/"+m[2]] = v
		} else if v, ok := strings.CutPrefix(line, "replayguard_received_total "); ok {
			out["replayguard_received_total"], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

// checkRedundant checks what redundancy promises over the whole run: each
// message held by at least one path, so every one applied exactly once and
// no gap left; every record names feed a or b and came through one of that
// feed's brokers; each feed delivered some messages first and some copies.
func checkRedundant(t *testing.T, r *result, tw *twin) {
	t.Helper()
	brokers := map[string]map[string]bool{}
	for _, p := range tw.paths {
		brokers[p.name] = map[string]bool{}
		for _, u := range p.brokers() {
			brokers[p.name][u] = true
		}
	}
	applied := map[seqKey]int{}
	firsts, dups := map[string]int{}, map[string]int{}
	fail := bounded(t)
	for _, rec := range r.Records {
		if !brokers[rec.Feed][rec.Broker] {
			fail("audit record %d (%s) names feed %q and broker %q", rec.Position, rec.Outcome, rec.Feed, rec.Broker)
			continue
		}
		switch rec.Outcome {
		case engine.Applied.String(), engine.AppliedLate.String():
			if len(rec.Source) == 1 && rec.Sequence != nil { // verifyStore reports any other
				applied[seqKey{rec.Source[0], *rec.Sequence}]++
			}
			firsts[rec.Feed]++
		case engine.Duplicate.String():
			dups[rec.Feed]++
		}
	}
	held := map[seqKey]bool{}
	for _, p := range tw.paths {
		for _, m := range p.pub.Acked() {
			held[seqKey{m.Source, m.Sequence}] = true
		}
	}
	for _, k := range (span{1, tw.last}).keys(tw.sources) {
		if !held[k] {
			t.Fatalf("%v was acknowledged by no path: the run cannot prove redundancy", k)
		}
		if applied[k] != 1 {
			fail("%v applied %d times, want once", k, applied[k])
		}
	}
	if r.GapSeqs != 0 || r.Lost != 0 {
		t.Errorf("%d gap sequences (%s), %d lost: each message was held by one path at least", r.GapSeqs, r.gapsString(), r.Lost)
	}
	for _, p := range tw.paths {
		if firsts[p.name] == 0 || dups[p.name] == 0 {
			t.Errorf("feed %s: %d messages delivered first, %d duplicates: both should be seen on each feed", p.name, firsts[p.name], dups[p.name])
		}
	}
	t.Logf("firsts by feed %v, duplicates by feed %v", firsts, dups)
}

// checkFinalFeedMetrics compares the last run's per-feed metrics with its
// audit records (those after head): the deliveries of the feeds add up to
// received_total, and each feed's firsts and duplicates are its records.
func checkFinalFeedMetrics(t *testing.T, r *result, head uint64, m map[string]float64) {
	t.Helper()
	want := map[string]float64{}
	for _, rec := range r.Records {
		if rec.Position <= head {
			continue
		}
		switch rec.Outcome {
		case engine.Applied.String(), engine.AppliedLate.String():
			want[feedFirst+"/"+rec.Feed]++
		case engine.Duplicate.String():
			want[feedDuplicates+"/"+rec.Feed]++
		}
	}
	for _, f := range []string{"a", "b"} {
		for _, name := range []string{feedFirst, feedDuplicates} {
			if got := m[name+"/"+f]; got != want[name+"/"+f] {
				t.Errorf("last run: %s{feed=%q} = %v, but its audit records say %v", name, f, got, want[name+"/"+f])
			}
		}
	}
	if sum := m[feedDeliveries+"/a"] + m[feedDeliveries+"/b"]; sum != m["replayguard_received_total"] {
		t.Errorf("last run: feed deliveries %v + %v = %v, received_total %v", m[feedDeliveries+"/a"], m[feedDeliveries+"/b"], sum, m["replayguard_received_total"])
	}
}

// bounded returns t.Errorf reporting the first maxErrors errors only.
func bounded(t *testing.T) func(format string, args ...any) {
	errs := 0
	return func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= maxErrors {
			t.Errorf(format, args...)
		}
	}
}

// checkFailover checks one path's failover in the audit: what was
// published while it was down was decided first, through the other feed
// alone, and nothing else was; what its primary lost came through the
// other feed, all but the consumer's receive maximum never through this
// one, none from the standby; the standby replayed every message of its snapshot, found duplicate.
func checkFailover(t *testing.T, r *result, fo failover, sources []string) {
	t.Helper()
	fail := bounded(t)
	byKey := map[seqKey][]engine.AuditRecord{}
	firsts := 0
	for _, rec := range r.Records {
		if len(rec.Source) != 1 || rec.Sequence == nil { // verifyStore reports these
			continue
		}
		k := seqKey{rec.Source[0], *rec.Sequence}
		byKey[k] = append(byKey[k], rec)
		published := k.seq >= fo.whileDown.from && k.seq <= fo.whileDown.to
		if published && rec.Feed != fo.other {
			fail("%v, published while path %s was down, has a %s record from feed %s", k, fo.path, rec.Outcome, rec.Feed)
		}
		if rec.Position > fo.downFrom && rec.Position <= fo.downTo && rec.Outcome != engine.Duplicate.String() {
			firsts++
			if !published {
				fail("%v %s at record %d, while path %s was down: it was published before", k, rec.Outcome, rec.Position, fo.path)
			}
		}
	}
	down := fo.whileDown.keys(sources)
	if firsts != len(down) {
		fail("%d messages decided first while path %s was down, want the %d published then", firsts, fo.path, len(down))
	}
	lost, neverOnPath := fo.lost.keys(sources), 0
	for _, k := range lost {
		on := false
		for _, rec := range byKey[k] {
			on = on || rec.Feed == fo.path
			if rec.Broker == fo.standby {
				fail("%v, acknowledged by path %s's primary after the snapshot, came from its standby (record %d)", k, fo.path, rec.Position)
			}
		}
		if !on {
			neverOnPath++
		}
	}
	// Mosquitto sends the frozen consumer about receiveMaximum of them
	// and queues the rest, which only the other path delivered. It is not
	// exact: a consumer that reconnected after a kill has been sent up to
	// 140 of 300 (2.0.11, one run in ten). That the path lost a share of
	// them is the premise of the test; that none is missing is checked
	// above, whichever path brought it.
	t.Logf("path %s: %d of the %d messages its primary acknowledged after the snapshot never came through it",
		fo.path, neverOnPath, len(lost))
	if neverOnPath < len(lost)/3 {
		fail("path %s: %d of the %d messages its primary lost never came through it, want a third at least: the path lost too little for the test to prove anything",
			fo.path, neverOnPath, len(lost))
	}
	for _, k := range fo.replayed.keys(sources) {
		if !slices.ContainsFunc(byKey[k], func(rec engine.AuditRecord) bool {
			return rec.Feed == fo.path && rec.Broker == fo.standby && rec.Outcome == engine.Duplicate.String()
		}) {
			fail("%v, in path %s's snapshot, was not replayed by its standby as a duplicate", k, fo.path)
		}
	}
}
