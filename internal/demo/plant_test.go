package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The plant story end to end: the standby resends session 7's birth and
// readings, which the naive host bills twice while replayguard's meter
// sums each reading once, across the seq wrap and two rebirths.
func TestThePlantStandbyReplaysSessionSevenAndOnlyTheNaiveBillIsWrong(t *testing.T) {
	s := newStoryNamed(StoryPlant)
	replayed := truthOf(newMeterHost(), s.held)["meter/meter-3"]["kwh"] // what the standby resends
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := &watchedWriter{}
	holding := out.when("The dashboard stays up at ")
	opts := fastOptions(t)
	opts.Story, opts.Hold = StoryPlant, 5*time.Second
	ctx, endHold := context.WithCancel(ctx)
	var sources []servedSource
	go func() {
		defer endHold()
		select {
		case <-holding:
		case <-ctx.Done():
			return
		}
		sources = fetchSources(t, out.String())
	}()
	res, err := run(ctx, out, opts)
	t.Logf("its output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo --story plant: %v", err)
	}

	naive, guard, truth := res.naive["meter/meter-3"]["kwh"], res.guard["meter/meter-3"]["kwh"], res.truth["meter/meter-3"]["kwh"]
	if guard != truth {
		t.Errorf("replayguard's meter/meter-3 kwh = %s, want the meter's register, %s", guard, truth)
	}
	if want, _ := addDecimal(truth, replayed); naive != want {
		t.Errorf("the naive bill is %s kWh, want the register %s plus the %s kWh the standby resent", naive, truth, replayed)
	}
	if res.naiveReplays != len(s.held) || res.duplicates != len(s.held) {
		t.Errorf("the naive host applied %d replays again and replayguard suppressed %d; want the %d messages session 7 held",
			res.naiveReplays, res.duplicates, len(s.held))
	}
	if all := len(s.all()); res.applied != all {
		t.Errorf("replayguard applied %d messages, want each of the %d once", res.applied, all)
	}
	if res.auditErr != nil || res.audited != uint64(len(s.all())+len(s.held)) {
		t.Errorf("audit verify: %d records, %v; want every delivery's record in an intact chain", res.audited, res.auditErr)
	}
	checkPlantSources(t, sources)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`meter/meter-3\s+kwh\s+` + regexp.QuoteMeta(naive) + `\s+✗ wrong\s+` + regexp.QuoteMeta(truth) + `\s+` + regexp.QuoteMeta(truth) + `\n`),
		regexp.MustCompile(`NDATA seq 0\s+seq wraps 255 → 0; replayguard unwraps it to sequence 256 of session 8\n`),
		regexp.MustCompile(`the naive consumer billed ` + regexp.QuoteMeta(replayed) + ` kWh more`),
		regexp.MustCompile(`sources:\s+plant/meter-3 online, bdSeq 9; epoch 9 high 3; kept: session 8 high 270, session 7 high 4\n`),
		regexp.MustCompile(`Audit chain intact: ` + strconv.Itoa(int(res.audited)) + ` records`),
		regexp.MustCompile(`replayguard's is exact\.`),
		// The meter's lineage: a change a reading, of which the terminal
		// shows those the replays came for, and the last.
		regexp.MustCompile(`meter/meter-3: ` + strconv.Itoa(res.applied) + ` changes, ` + strconv.Itoa(len(s.held)) +
			` replays suppressed; shown: the ` + strconv.Itoa(len(s.held)) + ` the replays came for, and the last\n`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output lacks %v", want)
		}
	}
	if shown := strings.Count(out.String(), "  applied\n"); shown != len(s.held)+1 {
		t.Errorf("the lineage shows %d changes, want the %d the replays came for and the last", shown, len(s.held))
	}
}

// servedSource is what /api/v1/sources serves of a Sparkplug source.
type servedSource struct {
	Route  string   `json:"route"`
	Source []string `json:"source"`
	Epoch  string   `json:"epoch"`
	High   int64    `json:"high"`
	Older  []struct {
		Epoch string `json:"epoch"`
		High  int64  `json:"high"`
	} `json:"older_epochs"`
	Sparkplug *struct {
		Online bool  `json:"online"`
		BdSeq  int64 `json:"bdseq"`
	} `json:"sparkplug"`
}

// checkPlantSources checks the edge node's session as the dashboard's API
// served it during the hold: online in session 9, sessions 8 and 7 kept.
func checkPlantSources(t *testing.T, sources []servedSource) {
	t.Helper()
	if len(sources) != 1 {
		t.Fatalf("sources served %+v, want the edge node's alone", sources)
	}
	s := sources[0]
	if s.Route != "plant" || len(s.Source) != 2 || s.Source[0] != "plant" || s.Source[1] != "meter-3" {
		t.Errorf("source %s %v, want plant [plant meter-3]", s.Route, s.Source)
	}
	if s.Sparkplug == nil || !s.Sparkplug.Online || s.Sparkplug.BdSeq != 9 {
		t.Errorf("the edge node's session %+v, want online with bdSeq 9", s.Sparkplug)
	}
	if s.Epoch != "9" || s.High != 3 {
		t.Errorf("epoch %s high %d, want session 9 at its third reading", s.Epoch, s.High)
	}
	if len(s.Older) != 2 || s.Older[0].Epoch != "8" || s.Older[0].High != liveReadings || s.Older[1].Epoch != "7" || s.Older[1].High != heldReadings {
		t.Errorf("older sessions %+v, want 8 up to %d (past the seq wrap) and 7 up to %d", s.Older, liveReadings, heldReadings)
	}
}

// fetchSources reads /api/v1/sources from the dashboard the output names.
func fetchSources(t *testing.T, output string) []servedSource {
	u := dashboardURL(t, output)
	if u == "" {
		return nil
	}
	resp, err := http.Get(u + "api/v1/sources")
	if err != nil {
		t.Errorf("dashboard: %v", err)
		return nil
	}
	defer resp.Body.Close()
	var out []servedSource
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("dashboard: GET /api/v1/sources: %s, %v", resp.Status, err)
	}
	return out
}

func TestAnUnknownStoryIsRefused(t *testing.T) {
	o := Options{Story: "nope"}
	if err := o.setDefaults(); !errors.Is(err, ErrOptions) || !regexp.MustCompile(`story "nope": the stories are incident, plant and redundant$`).MatchString(err.Error()) {
		t.Errorf("Story nope: err = %v, want ErrOptions naming the stories", err)
	}
}

func TestTheNaiveHostBillsEveryDeliveryByAlias(t *testing.T) {
	s := newStoryNamed(StoryPlant)
	h := newMeterHost()
	p := picture{}
	for _, m := range s.held {
		h.apply(p, m.topic, m.payload)
	}
	once := p["meter/meter-3"]["kwh"]
	for _, m := range s.held[1:] { // the readings again, by alias
		h.apply(p, m.topic, m.payload)
	}
	if once != "0.95" || p["meter/meter-3"]["kwh"] != "1.9" || p["meter/meter-3"]["status"] != "running" {
		t.Errorf("billed %s kWh for session 7, then %s with its readings again (status %q); want 0.95, 1.9, running",
			once, p["meter/meter-3"]["kwh"], p["meter/meter-3"]["status"])
	}
}
