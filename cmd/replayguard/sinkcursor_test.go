package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/store/embedded"
)

// TestRetentionKeepsWhatASinkOfAnotherMemberHasNotDelivered runs two
// members on a shared store whose audit sinks differ: member a streams to
// a file sink only; member b also to a second sink, named second, and
// streams a's chain to it while a is gone. When a comes back with
// retention on, it must not trim the records of its chain that second has
// not delivered (second's cursor on a's chain is in the store, though a
// does not configure it): it holds retention at that cursor and says so,
// naming the sink and the chain, and when b streams a's chain again the
// second sink receives every record of it, none missed.
func TestRetentionKeepsWhatASinkOfAnotherMemberHasNotDelivered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and Redis")
	}
	for _, kind := range []struct {
		name   string
		groups func(t *testing.T) groupConfig
	}{
		{"on PostgreSQL", postgresGroups},
		{"on Redis", redisGroups},
	} {
		t.Run(kind.name, func(t *testing.T) {
			groups := kind.groups(t)
			dir := t.TempDir()
			archive, second := filepath.Join(dir, "archive"), filepath.Join(dir, "second.jsonl")
			cfgA := groups(t, "sinkcursors", "member: a")
			appendConfig(t, cfgA, fmt.Sprintf("audit: {sinks: [{name: jsonl, kind: file, path: %s}]}\n", filepath.Join(dir, "a.jsonl")))
			cfgAKeep := groups(t, "sinkcursors", "member: a")
			appendConfig(t, cfgAKeep, fmt.Sprintf("audit: {retention: {max_records: 10}, archive: %s, sinks: [{name: jsonl, kind: file, path: %s}]}\n",
				archive, filepath.Join(dir, "a.jsonl")))
			cfgB := groups(t, "sinkcursors", "member: b")
			appendConfig(t, cfgB, fmt.Sprintf("audit: {sinks: [{name: jsonl, kind: file, path: %s}, {name: second, kind: file, path: %s}]}\n",
				filepath.Join(dir, "b.jsonl"), second))

			mustIngest(t, cfgA, meterFeed(t, 0, 100))
			mustIngest(t, cfgB, meterFeed(t, 1000, 10)) // a is gone: b streams a's chain to second, up to 100
			errs := mustIngest(t, cfgAKeep, meterFeed(t, 2000, 100))
			// Held at second's cursor, 100: the 90 records after it up to
			// 190 (200 less max_records) stay, said.
			mustSay(t, errs, "audit retention: 100 records of member a's chain archived")
			mustSay(t, errs, "audit sink second has yet to deliver 90 records of member a's chain beyond audit.retention.max_records (10), from its cursor at 100")
			mustSay(t, errs, "sink=second")
			mustSay(t, errs, "chain=a")
			errs = mustIngest(t, cfgB, meterFeed(t, 3000, 10))
			if strings.Contains(errs, "missed records") {
				t.Errorf("the second sink missed records of a's chain:\n%s", errs)
			}
			if got := sinkPositions(t, second, "a"); !slices.Equal(got, positions(1, 200)) {
				t.Fatalf("the second sink holds a's positions %v; want 1..200 once each, in order", got)
			}

			// The second sink is removed for good: its cursors hold a's
			// chain back until an operator forgets them, audited.
			errs = mustIngest(t, cfgAKeep, meterFeed(t, 4000, 100))
			mustSay(t, errs, "audit retention: 100 records of member a's chain archived")
			mustSay(t, errs, "sink=second")
			out := mustRun(t, "", "audit", "forget-sink", "second", "--reason", "the collector is decommissioned", "--operator", "alice", "-c", cfgAKeep)
			mustSay(t, out, "audit sink second forgotten by alice: its cursors (member a's chain at 200, member b's chain at 20) no longer hold retention back (audit position 301 of member a)")
			errs = mustIngest(t, cfgAKeep, meterFeed(t, 5000, 10))
			// 301 is the audit record of the forgetting, on a's chain (store.member).
			mustSay(t, errs, "audit retention: 101 records of member a's chain archived")
			if strings.Contains(errs, "sink=second") {
				t.Fatalf("the forgotten sink still holds retention back:\n%s", errs)
			}
		})
	}
}

// TestARemovedSinkHoldsRetentionBackUntilAnOperatorForgetsIt removes a
// sink from a single instance's configuration on the embedded store: its
// stored cursor holds retention back, with a warning naming it, until
// `audit forget-sink` drops it, which writes an audit record naming the
// operator. A sink the configuration names, or one with no cursor, is
// refused.
func TestARemovedSinkHoldsRetentionBackUntilAnOperatorForgetsIt(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	sinks := fmt.Sprintf("{name: jsonl, kind: file, path: %s}", filepath.Join(dir, "audit.jsonl"))
	gone := fmt.Sprintf("{name: gone, kind: file, path: %s}", filepath.Join(dir, "gone.jsonl"))
	before := testConfig(t, fmt.Sprintf("audit: {sinks: [%s, %s]}\n", sinks, gone))
	after := filepath.Join(filepath.Dir(before), "after.yaml")
	b, err := os.ReadFile(before)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), fmt.Sprintf("audit: {sinks: [%s, %s]}", sinks, gone),
		fmt.Sprintf("audit: {retention: {max_records: 10}, archive: %s, sinks: [%s]}", archive, sinks), 1)
	if err := os.WriteFile(after, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	mustIngest(t, before, meterFeed(t, 0, 100))
	errs := mustIngest(t, after, meterFeed(t, 100, 100))
	mustSay(t, errs, "audit retention: 100 records archived") // held at gone's cursor, 100
	mustSay(t, errs, "sink=gone")
	mustSay(t, errs, "audit sink gone has yet to deliver 90 records beyond audit.retention.max_records (10), from its cursor at 100")
	if _, errs, code := cli(t, "", "audit", "forget-sink", "jsonl", "--reason", "x", "-c", after); code != 1 || !strings.Contains(errs, `audit.sinks names "jsonl"`) || strings.Contains(errs, "usage:") {
		t.Fatalf("forget-sink of a configured sink: exit %d\n%s", code, errs)
	}
	out := mustRun(t, "", "audit", "forget-sink", "gone", "--reason", "the collector is decommissioned", "--operator", "alice", "-c", after)
	mustSay(t, out, "audit sink gone forgotten by alice: its cursors (at 100) no longer hold retention back (audit position 201)")
	var rec struct{ Outcome, Reason, Operator string }
	for _, line := range jsonLines(mustRun(t, "", "audit", "export", "-c", after)) {
		if strings.Contains(line, "sink_forgotten") {
			json.Unmarshal([]byte(line), &rec)
		}
	}
	if rec.Operator != "alice" || !strings.Contains(rec.Reason, "audit sink gone forgotten, its cursors dropped (at 100): the collector is decommissioned") {
		t.Fatalf("the audit record of the forgotten sink: %+v", rec)
	}
	errs = mustIngest(t, after, meterFeed(t, 200, 10))
	mustSay(t, errs, "audit retention: 101 records archived")
	if strings.Contains(errs, "sink=gone") {
		t.Fatalf("the forgotten sink still holds retention back:\n%s", errs)
	}
	if _, errs, code := cli(t, "", "audit", "forget-sink", "gone", "--reason", "again", "-c", after); code == 0 || !strings.Contains(errs, "no cursor of that audit sink is stored") {
		t.Fatalf("forget-sink of a sink with no cursor: exit %d\n%s", code, errs)
	}
}

// mustIngest ingests feed with cfg and returns its stderr.
func mustIngest(t *testing.T, cfg, feed string) string {
	t.Helper()
	_, errs, code := cli(t, "", "ingest", "-c", cfg, "--batch", "10", feed)
	if code != 0 {
		t.Fatalf("ingest -c %s: exit %d\n%s", cfg, code, errs)
	}
	t.Logf("ingest -c %s:\n%s", cfg, errs)
	return errs
}

// sinkPositions returns the positions of member's records a file sink
// wrote to path, in the file's order.
func sinkPositions(t *testing.T, path, member string) []uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, line := range jsonLines(string(b)) {
		var rec struct {
			Member   string
			Position uint64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: %v: %.200s", path, err, line)
		}
		if rec.Member == member {
			got = append(got, rec.Position)
		}
	}
	return got
}

// positions returns from..to.
func positions(from, to uint64) []uint64 {
	var out []uint64
	for p := from; p <= to; p++ {
		out = append(out, p)
	}
	return out
}

// TestTheRetentionWarningOfARemovedSinkNamesACommandThatRuns reads the
// command the warning of a removed sink's cursor gives as its remedy and
// runs it, TEXT filled in: it forgets the sink, rather than failing on a
// flag the warning left out.
func TestTheRetentionWarningOfARemovedSinkNamesACommandThatRuns(t *testing.T) {
	dir := t.TempDir()
	gone := fmt.Sprintf("{name: gone, kind: file, path: %s}", filepath.Join(dir, "gone.jsonl"))
	before := testConfig(t, fmt.Sprintf("audit: {sinks: [%s]}\n", gone))
	after := filepath.Join(filepath.Dir(before), "after.yaml")
	b, err := os.ReadFile(before)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), fmt.Sprintf("audit: {sinks: [%s]}", gone),
		fmt.Sprintf("audit: {retention: {max_records: 10}, archive: %s}", filepath.Join(dir, "archive")), 1)
	if err := os.WriteFile(after, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, before, meterFeed(t, 0, 20))
	errs := mustIngest(t, after, meterFeed(t, 20, 20))
	m := regexp.MustCompile("run `replayguard ([^`]*)`").FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("the warning of the removed sink gives no command to run:\n%s", errs)
	}
	args := strings.Fields(strings.ReplaceAll(m[1], "TEXT", "decommissioned"))
	out, errs, code := cli(t, "", append(args, "-c", after)...)
	if code != exitOK {
		t.Fatalf("replayguard %s, as the warning gives it: exit %d\n%s%s", m[1], code, out, errs)
	}
	mustSay(t, out, "audit sink gone forgotten")
}

// TestForgetSinkOnAHeldEmbeddedStoreSaysToStopTheInstance: forget-sink
// opens the store itself, never through a running instance's API, so on an
// embedded store another process holds it says what to do: stop that
// instance first.
func TestForgetSinkOnAHeldEmbeddedStoreSaysToStopTheInstance(t *testing.T) {
	gone := fmt.Sprintf("{name: gone, kind: file, path: %s}", filepath.Join(t.TempDir(), "gone.jsonl"))
	before := testConfig(t, fmt.Sprintf("audit: {sinks: [%s]}\n", gone))
	after := filepath.Join(filepath.Dir(before), "after.yaml")
	b, err := os.ReadFile(before)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(after, []byte(strings.Replace(string(b), fmt.Sprintf("audit: {sinks: [%s]}\n", gone), "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, before, meterFeed(t, 0, 5))
	held, err := embedded.Open(filepath.Join(filepath.Dir(before), "data"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, errs, code := cli(t, "", "audit", "forget-sink", "gone", "--reason", "decommissioned", "-c", after)
	if code != 1 || !strings.Contains(errs, "stop the instance that holds it") {
		t.Fatalf("forget-sink on a held store: exit %d\n%s", code, errs)
	}
}
