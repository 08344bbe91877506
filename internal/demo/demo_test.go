package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs to t until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// fastOptions run the story in a couple of seconds on a free dashboard port.
func fastOptions(t *testing.T) Options {
	return Options{Listen: "127.0.0.1:0", Pace: 20 * time.Millisecond, Logger: testLogger(t)}
}

func TestTheStandbyReplaysAndOnlyTheNaivePictureIsWrong(t *testing.T) {
	reports := len(newStoryNamed(StoryIncident).all())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := &watchedWriter{}
	holding := out.when("The dashboard stays up at ")
	opts := fastOptions(t)
	opts.Hold = 5 * time.Second
	opts.Report = filepath.Join(t.TempDir(), "after-action.html")
	ctx, endHold := context.WithCancel(ctx)
	var served map[string]map[string]any
	var metrics, explained string
	var ready served503
	go func() {
		defer endHold() // an interrupt during the hold ends the demo normally
		select {
		case <-holding:
		case <-ctx.Done():
			return
		}
		served = fetchState(t, out.String())
		metrics = fetchMetrics(t, out.String())
		explained = fetchDashboard(t, out.String(), "api/v1/explain/incident/7")
		ready = fetchReadyz(t, out.String())
	}()
	start := time.Now()
	res, err := run(ctx, out, opts)
	t.Logf("demo took %v; its output:\n%s", time.Since(start), out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}

	if got := res.naive["incident/7"]["casualties"]; got == "3" {
		t.Errorf("naive casualties = %s: the replays were not applied", got)
	}
	if got := res.guard["incident/7"]["casualties"]; got != "3" {
		t.Errorf("replayguard casualties = %s, want 3", got)
	}
	if got := res.naive["unit/E7"]["status"]; got != "assigned" {
		t.Errorf("naive E7 status = %q, want \"assigned\"", got)
	}
	if got := res.guard["unit/E7"]["status"]; got != "available" {
		t.Errorf("replayguard E7 status = %q, want \"available\"", got)
	}
	if res.duplicates == 0 {
		t.Error("replayguard suppressed no duplicate")
	}

	if d := diffs(res.rows, boardOf); d != "" {
		t.Errorf("the dispatch board's picture differs from the truth: %s", d)
	}
	if res.applied != reports || res.cleanCounts.keys != res.applied {
		t.Errorf("replayguard applied %d of the %d reports, the dispatch board saw %d distinct keys: want all, each once",
			res.applied, reports, res.cleanCounts.keys)
	}
	if c := res.cleanCounts; c.copies != c.keys+c.repeats || c.unkeyed != 0 || c.invalid != 0 {
		t.Errorf("the dispatch board's %d copies are not its %d keys plus %d repeats (%d without a key, %d not a report)",
			c.copies, c.keys, c.repeats, c.unkeyed, c.invalid)
	}
	if res.forwarded < res.cleanCounts.keys {
		t.Errorf("the COP broker acknowledged %d copies, fewer than the %d keys the board received", res.forwarded, res.cleanCounts.keys)
	}
	for _, want := range []string{
		`replayguard_forwarded_total{output="mqtt",result="delivered"} ` + strconv.Itoa(res.forwarded) + "\n",
		"replayguard_outbox_entries 0\n",
		"replayguard_ready 0\n", // the consumer stopped with the story, as /readyz says
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the dashboard's /metrics lacks %q during the hold", want)
		}
	}

	if got := served["incident/7"]["casualties"]; got != 3.0 {
		t.Errorf("the dashboard's API served incident/7 casualties %v during the hold, want 3", got)
	}
	// The lineage the dashboard opens on a click, as `run` serves it.
	var lineage struct {
		Entity  string                     `json:"entity"`
		State   map[string]json.RawMessage `json:"state"`
		Changes []json.RawMessage          `json:"changes"`
	}
	if err := json.Unmarshal([]byte(explained), &lineage); err != nil || lineage.Entity != "incident/7" ||
		len(lineage.Changes) == 0 || string(lineage.State["casualties"]) != "3" {
		t.Errorf("the dashboard's /api/v1/explain/incident/7 during the hold: %v: %.500s", err, explained)
	}
	if ready.status != http.StatusServiceUnavailable || !strings.Contains(ready.body, "the demo's stories are over") {
		t.Errorf("/readyz during the hold: %d %s, want 503 saying the stories are over", ready.status, ready.body)
	}

	text := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`incident/7\s+casualties\s+6\s+✗ wrong\s+3\s+3\s+3\n`),
		regexp.MustCompile(`unit/E7\s+status\s+assigned\s+✗ wrong\s+available\s+available\s+available\n`),
		regexp.MustCompile(`dispatch board: \d+ cop(y|ies) on clean/#, ` + strconv.Itoa(reports) + ` distinct keys \(`),
		regexp.MustCompile(`replayguard-key=[0-9a-f]{12}…  replayguard-route=incidents  replayguard-source=\["[a-z]+","[a-z0-9-]+"\]  replayguard-epoch=\d+  replayguard-sequence=\d+\n`),
		regexp.MustCompile(`dispatch board: no copy on the clean stream meanwhile`),
		regexp.MustCompile(`replayguard's and the dispatch board's are exact`),
		regexp.MustCompile(`replayguard suppressed \d+ replays? as duplicates \(\d+ arrived with DUP=0\)`),
		regexp.MustCompile(`dashboard\s+http://127\.0\.0\.1:\d+/`),
		// The lineage after the table: the two casualty reports, each with
		// its replay from the standby beside it.
		regexp.MustCompile(`incident/7: \d+ changes, \d+ replays suppressed\n`),
		regexp.MustCompile(`casualties add 2 -> 2\n\s+suppressed #\d+ .* broker tcp://127\.0\.0\.1:\d+`),
		regexp.MustCompile(`casualties add 1 -> 3\n\s+suppressed #\d+ `),
		regexp.MustCompile(`state: casualties 3 `),
	} {
		if !want.MatchString(text) {
			t.Errorf("output lacks %v", want)
		}
	}
	if !strings.Contains(text, "The after-action report of replayguard's audit log: "+opts.Report+"\n") {
		t.Errorf("the output does not say where the report is")
	}
	page, err := os.ReadFile(opts.Report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `<rect class="bar o-duplicate"`) || !strings.Contains(string(page), `class="failover"`) ||
		!strings.Contains(string(page), `id="verdict">intact<`) || !strings.Contains(string(page), `data-entity="incident/7">Lineage of`) {
		t.Errorf("the report shows no replay burst, no failover or no intact chain:\n%.3000s", page)
	}
}

func TestATakenDashboardPortFallsBackToAFreeOne(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ln, err := listenDashboard(taken.Addr().String())
	if err != nil {
		t.Fatalf("listenDashboard(%s): %v", taken.Addr(), err)
	}
	defer ln.Close()
	if ln.Addr().String() == taken.Addr().String() {
		t.Fatalf("listened on the taken address %s", ln.Addr())
	}
}

func TestOptionsRefuseANonLoopbackDashboard(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:9780", "192.0.2.1:9780", ":9780", "nonsense"} {
		o := Options{Listen: listen}
		if err := o.setDefaults(); !errors.Is(err, ErrOptions) {
			t.Errorf("Listen %q: err = %v, want ErrOptions", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:0", "localhost:9780", "[::1]:9780"} {
		o := Options{Listen: listen}
		if err := o.setDefaults(); err != nil {
			t.Errorf("Listen %q: %v", listen, err)
		}
	}
}

func TestACancelledDemoStopsEverything(t *testing.T) {
	for _, story := range Stories {
		t.Run(story, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var out bytes.Buffer
			opts := fastOptions(t)
			opts.Story, opts.Pace = story, 200*time.Millisecond
			time.AfterFunc(700*time.Millisecond, cancel)
			err := Run(ctx, &out, opts)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled; output:\n%s", err, out.String())
			}
		})
	}
	// goleak in TestMain checks that nothing is left running.
}

// TestAtTheDefaultPace runs each story as `replayguard demo` does, when
// REPLAYGUARD_DEMO_FULL=1, and reports how long it took.
func TestAtTheDefaultPace(t *testing.T) {
	if os.Getenv("REPLAYGUARD_DEMO_FULL") != "1" {
		t.Skip("set REPLAYGUARD_DEMO_FULL=1 to run the demo at its normal pace")
	}
	for _, story := range Stories {
		t.Run(story, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Now()
			err := Run(context.Background(), &out, Options{Story: story, Listen: "127.0.0.1:0", Logger: testLogger(t)})
			took := time.Since(start)
			t.Logf("demo --story %s took %v; its output:\n%s", story, took, out.String())
			if err != nil {
				t.Fatal(err)
			}
			if took > 30*time.Second {
				t.Errorf("demo took %v, over 30s", took)
			}
		})
	}
}

// watchedWriter collects Run's output and tells when a text appears.
type watchedWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	texts map[string]chan struct{}
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	for text, ch := range w.texts {
		if strings.Contains(w.buf.String(), text) {
			close(ch)
			delete(w.texts, text)
		}
	}
	return n, err
}

func (w *watchedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// when returns a channel closed once text has been written.
func (w *watchedWriter) when(text string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.texts == nil {
		w.texts = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	w.texts[text] = ch
	return ch
}

// dashboardURL is the dashboard address the output names, or "".
func dashboardURL(t *testing.T, output string) string {
	m := regexp.MustCompile(`dashboard\s+(http://\S+/)`).FindStringSubmatch(output)
	if m == nil {
		t.Error("no dashboard address in the output")
		return ""
	}
	return m[1]
}

// fetchMetrics reads /metrics from the dashboard the output names.
func fetchMetrics(t *testing.T, output string) string { return fetchDashboard(t, output, "metrics") }

// fetchDashboard reads path from the dashboard the output names; "" when
// the output names none.
func fetchDashboard(t *testing.T, output, path string) string {
	u := dashboardURL(t, output)
	if u == "" {
		return ""
	}
	resp, err := http.Get(u + path)
	if err != nil {
		t.Errorf("dashboard: %v", err)
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("dashboard: GET /%s: %s, %v", path, resp.Status, err)
	}
	return string(b)
}

// served503 is what an endpoint answered, whatever its status.
type served503 struct {
	status int
	body   string
}

// fetchReadyz reads /readyz from the dashboard the output names.
func fetchReadyz(t *testing.T, output string) served503 {
	u := dashboardURL(t, output)
	if u == "" {
		return served503{}
	}
	resp, err := http.Get(u + "readyz")
	if err != nil {
		t.Errorf("dashboard: %v", err)
		return served503{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("dashboard: GET /readyz: %v", err)
	}
	return served503{resp.StatusCode, string(b)}
}

// fetchState reads /api/v1/state from the dashboard the output names.
func fetchState(t *testing.T, output string) map[string]map[string]any {
	u := dashboardURL(t, output)
	if u == "" {
		return nil
	}
	resp, err := http.Get(u + "api/v1/state")
	if err != nil {
		t.Errorf("dashboard: %v", err)
		return nil
	}
	defer resp.Body.Close()
	var state map[string]map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&state); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("dashboard: GET /api/v1/state: %s, %v", resp.Status, err)
	}
	return state
}

// TestWithoutHoldTheEndNamesNoStoppedDashboardAsLive: without --hold the
// dashboard stops with the story, so the lines after it do not send a
// person to its addresses as though they answered.
func TestWithoutHoldTheEndNamesNoStoppedDashboardAsLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	opts := fastOptions(t)
	if err := Run(ctx, &out, opts); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	end := s[strings.Index(s, "story over"):]
	for _, line := range strings.Split(end, "\n") {
		if strings.Contains(line, "http://") && !strings.Contains(line, "--hold") {
			t.Errorf("the output points at the stopped dashboard: %s", line)
		}
	}
}
