package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's ten-line configuration, and what its two commands say they
// print, hold: the front door's example runs as written.
func TestTheReadmeExampleRunsAsWritten(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := after(t, string(b), "## A configuration in ten lines")
	yaml := block(t, section, "```yaml\n")
	if n := strings.Count(yaml, "\n"); n > 10 {
		t.Errorf("the README's configuration is %d lines, not ten", n)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "meters.yaml")
	store := "store: {path: " + filepath.Join(dir, "data") + "}\n" // not ./replayguard-data, the README's default
	if err := os.WriteFile(cfg, []byte(yaml+store), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "lint", "-c", cfg)
	commands := strings.Split(strings.TrimSpace(block(t, section, "```sh\n")), "\n")
	for _, verb := range []string{"ingest", "state"} {
		line := find(t, commands, "replayguard "+verb+" ")
		_, claim, _ := strings.Cut(line, "#")
		args := []string{verb, "-c", cfg}
		if verb == "ingest" {
			args = append(args, "../../examples/meters.jsonl")
		}
		out := mustRun(t, "", args...)
		for _, want := range strings.Fields(claim) {
			if want != "…" && !strings.Contains(out, want) {
				t.Errorf("README says `replayguard %s` prints %q; it printed:\n%s", verb, want, out)
			}
		}
	}
}

func after(t *testing.T, s, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, heading)
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	return rest
}

// block returns the text of the first fenced block opened by fence.
func block(t *testing.T, s, fence string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, fence)
	if !ok {
		t.Fatalf("no %q block", strings.TrimSpace(fence))
	}
	body, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("the %q block is not closed", strings.TrimSpace(fence))
	}
	return body
}

func find(t *testing.T, lines []string, s string) string {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	t.Fatalf("README shows no %q command", s)
	return ""
}

// The README's explain example prints what the README shows, "…" standing
// for what differs from run to run (times) or is cut short (keys).
func TestTheReadmeExplainExampleRunsAsWritten(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := after(t, string(b), "## Why a value is what it is")
	commands := strings.Split(strings.TrimSpace(block(t, section, "```sh\n")), "\n")
	cfg := testConfig(t, "")
	t.Chdir("../..") // the README's commands run there
	mustRun(t, "", "ingest", "-c", cfg, "examples/incidents.jsonl")
	line := find(t, commands, "replayguard explain ")
	_, rest, _ := strings.Cut(line, "replayguard explain -c examples/replayguard.yaml ")
	out := mustRun(t, "", append([]string{"explain", "-c", cfg}, strings.Fields(rest)...)...)
	lines := strings.Split(out, "\n")
	at := 0
	for _, want := range strings.Split(strings.TrimSpace(block(t, section, "```text\n")), "\n") {
		for ; at < len(lines) && !matches(lines[at], want); at++ {
		}
		if at == len(lines) {
			t.Fatalf("README shows %q; explain printed, in this order, nothing like it:\n%s", want, out)
		}
		at++
	}
}

// matches reports whether line holds the parts of want between its "…",
// in order, want's first part at line's start.
func matches(line, want string) bool {
	parts := strings.Split(want, "…")
	if !strings.HasPrefix(line, parts[0]) {
		return false
	}
	line = line[len(parts[0]):]
	for _, p := range parts[1:] {
		i := strings.Index(line, p)
		if i < 0 {
			return false
		}
		line = line[i+len(p):]
	}
	return len(parts) > 1 || line == ""
}
