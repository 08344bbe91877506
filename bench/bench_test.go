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
