package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/benchfeed"
)

func TestKeptCheck(t *testing.T) {
	feed := benchfeed.Generate(2000, 10, 0.2)
	exact := make([]bool, len(feed))
	for i := range feed {
		exact[i] = !feed[i].Replay
	}
	tests := []struct {
		name           string
		kept           func(i int) bool
		ok             bool
		dropped, twice int
	}{
		{"a tool that keeps each distinct update once is right", func(i int) bool { return exact[i] }, true, 0, 0},
		{"a tool that keeps everything kept every replay twice", func(int) bool { return true }, false, 0, len(feed) - 2000},
		{"a tool that keeps nothing dropped every update", func(int) bool { return false }, false, 2000, 0},
		{"a tool that drops an update and keeps its replay instead is right", func(i int) bool {
			if feed[i].Unique == firstReplayed(feed) {
				return feed[i].Replay
			}
			return exact[i]
		}, true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kept := make([]bool, len(feed))
			for i := range kept {
				kept[i] = tc.kept(i)
			}
			c := keptCheck(feed, kept)
			if c.ok() != tc.ok || c.dropped != tc.dropped || c.twice != tc.twice || c.unique != 2000 {
				t.Errorf("got %+v (ok %v), want ok %v, dropped %d, twice %d", c, c.ok(), tc.ok, tc.dropped, tc.twice)
			}
			if strings.Contains(c.String(), "WRONG") == tc.ok {
				t.Errorf("String() = %q", c)
			}
		})
	}
}

func firstReplayed(feed []benchfeed.Message) int {
	for _, m := range feed {
		if m.Replay {
			return m.Unique
		}
	}
	return -1
}

func TestCountCheck(t *testing.T) {
	if c := countCheck(110, 100, 100); !c.ok() {
		t.Errorf("exact count: %v", c)
	}
	if c := countCheck(110, 100, 98); c.ok() || c.dropped != 2 {
		t.Errorf("two short: %+v", c)
	}
	if c := (check{messages: 10, kept: 9}); c.ok() || !strings.Contains(c.String(), "9 of 10 delivered") {
		t.Errorf("no-op consumer short of one delivery: %v", c)
	}
}

func TestWriteSectionKeepsTheRestOfTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	head, tail := "# Benchmarks\n\nby hand\n", "## Later\n\nalso by hand\n"
	section := func(s string) string { return beginMarker + "\n" + s + "\n" + endMarker + "\n" }
	if err := os.WriteFile(path, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, section("first")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := head + "\n" + section("first"); string(b) != want {
		t.Fatalf("appended:\n%s\nwant:\n%s", b, want)
	}
	if err := os.WriteFile(path, append(b, "\n"+tail...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, section("second")); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if want := head + "\n" + section("second") + "\n" + tail; string(b) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", b, want)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 220035: "220,035", 1234567: "1,234,567"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSummarizeTakesTheMeanOfTheTwoMiddleRoundsOfAnEvenCount(t *testing.T) {
	ok := check{messages: 10, unique: 10, kept: 10, dedup: true}
	s := summarize([]result{{rate: 300, cpu: 3e-6, check: ok}, {rate: 100, cpu: 1e-6, check: ok}})
	if s.median != 200 || s.lo != 100 || s.hi != 300 || s.cpu != 2e-6 {
		t.Fatalf("median %v (%v–%v), cpu %v; want 200 (100–300), cpu 2e-06", s.median, s.lo, s.hi, s.cpu)
	}
	if s := summarize([]result{{rate: 3}, {rate: 1}, {rate: 2}}); s.median != 2 {
		t.Fatalf("median of three: %v, want 2", s.median)
	}
}

func TestAGoalIsNotMetByAReplayguardThatKeptTheWrongCount(t *testing.T) {
	wrong := result{rate: 1000, check: countCheck(110, 100, 90)}
	peer := result{rate: 100, check: check{messages: 110, kept: 110}}
	r := report{opts: options{rounds: 1}, rows: []row{{id: "x", what: "x", goal: 2, sides: []side{
		{name: "rg", results: []result{wrong}}, {name: "peer", results: []result{peer}}}}}}
	_, line, _ := strings.Cut(r.markdown(), "\n| x |")
	line, _, _ = strings.Cut(line, "\n")
	if strings.Contains(line, ": met") || !strings.Contains(line, "not met") {
		t.Fatalf("a 10× rate with 10 updates dropped: %s", line)
	}
}

func TestARoundThatReportedAnErrorFails(t *testing.T) {
	res := measure("x", func(h *harness) result {
		h.Errorf("republish of %s, which the broker never acknowledged", "bench#7")
		return result{rate: 1, check: check{messages: 1, kept: 1}}
	})
	if !strings.Contains(res.err, "bench#7") {
		t.Fatalf("result %+v, want the round failed with the error", res)
	}
}

func TestBenchResultWantsAnOutcomeForEveryDelivery(t *testing.T) {
	const head = "110 messages (0 MB) in 1.00 s: 110 msg/s durable, 8.00 µs CPU per message, embedded store at /x\n"
	for _, tc := range []struct {
		name, summary string
		ok            bool
	}{
		{"every delivery applied or a duplicate is read", "applied=100 applied_late=0 duplicate=10 conflict=0 quarantined=0 malformed=0 total=110", true},
		{"deliveries read and never decided are an error", "applied=100 applied_late=0 duplicate=4 conflict=0 quarantined=0 malformed=0 total=110", false},
		{"a held delivery is an error", "applied=100 applied_late=0 duplicate=9 conflict=1 quarantined=0 malformed=0 total=110", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := benchResult([]byte(head+tc.summary+"\n"), 110, 100)
			if (err == nil) != tc.ok || (err == nil && (res.rate != 110 || res.cpu != 8e-6 || !res.check.ok())) {
				t.Fatalf("%+v, %v", res, err)
			}
		})
	}
}
