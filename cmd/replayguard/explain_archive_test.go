package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A single-owner store whose every record retention moved into the
// archive: explain without that archive names the archived positions
// (exit 1), as it does for a log that begins past position 1, rather than
// blaming the entity ("no decision changed it in the 0 records read").
func TestExplainAWhollyArchivedLogNamesThePositions(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	cfg := testConfig(t, "audit:\n  retention: {max_age: 1ms}\n  archive: "+archive+"\n")
	capture := filepath.Join(dir, "meters.jsonl")
	var lines []string
	for _, id := range []string{"m-1", "m-2", "m-2", "m-3"} {
		lines = append(lines, `{"topic":"plant/meter-3/energy","payload":{"msgId":"`+id+`","kwh":0.25,"kw":16}}`)
	}
	if err := os.WriteFile(capture, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "ingest", "-c", cfg, capture)
	// The pass at the end of that ingest may come within max_age of its
	// records: once they are older, an ingest of nothing runs another.
	time.Sleep(10 * time.Millisecond)
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "ingest", "-c", cfg, empty)
	if out := mustRun(t, "", "explain", "meter/meter-3", "-c", cfg); !strings.Contains(out, "meter/meter-3: 3 changes, 1 replay suppressed") {
		t.Fatalf("with the archive:\n%s", out)
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "archive: "+archive, "archive: "+filepath.Join(dir, "elsewhere"), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := cli(t, "", "explain", "meter/meter-3", "-c", cfg)
	if code == 0 || !strings.Contains(errs, "1..4") {
		t.Fatalf("without the archive: exit %d, %s; want exit 1 naming positions 1..4", code, errs)
	}
}

// An operator who releases the held conflict of a reading (its key was
// applied: the release is decided duplicate) made a decision a reviewer
// must see beside the reading, with the operator's name and what it
// released; it is no replay from the broker.
func TestExplainNamesTheOperatorWhoReleasedAConflict(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/incidents.jsonl")
	mustRun(t, "", "quarantine", "release", "22", "--operator", "alice", "-c", cfg)
	text := mustRun(t, "", "explain", "incident/INC-0457", "-c", cfg)
	for _, want := range []string{"incident/INC-0457: 5 changes, 3 replays suppressed", "released from quarantine #22", "by alice"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain does not print %q:\n%s", want, text)
		}
	}
}

// explain --archive with another store's archive (whose positions happen
// to meet the store's first) is refused, as audit verify --archive refuses
// it, never read as the start of this store's lineage.
func TestExplainRefusesAnArchiveThatIsNotTheStoresChain(t *testing.T) {
	dir := t.TempDir()
	ingest3 := func(name, kwh string) (cfg, archive string) {
		archive = filepath.Join(dir, name+"-archive")
		cfg = testConfig(t, "audit:\n  retention: {max_records: 2}\n  archive: "+archive+"\n")
		for i := range 3 {
			capture := filepath.Join(dir, name+".jsonl")
			var lines []string
			for j := range 5 {
				lines = append(lines, `{"topic":"plant/m1/energy","payload":{"msgId":"r`+string(rune('0'+i))+`-`+string(rune('0'+j))+`","kwh":`+kwh+`}}`)
			}
			if err := os.WriteFile(capture, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			mustRun(t, "", "ingest", "-c", cfg, capture)
		}
		return cfg, archive
	}
	_, otherArchive := ingest3("a", "1")
	cfg, _ := ingest3("b", "7")
	if _, errs, code := cli(t, "", "audit", "verify", "--archive", otherArchive, "-c", cfg); code == 0 {
		t.Fatalf("audit verify with the other store's archive: exit 0, %s", errs)
	}
	out, errs, code := cli(t, "", "explain", "meter/m1", "--archive", otherArchive, "-c", cfg)
	if code == 0 {
		t.Fatalf("explain with the other store's archive: exit 0, no error; printed\n%s", out)
	}
	if !strings.Contains(errs, "position 14") {
		t.Errorf("explain with the other store's archive: %s; want the position where the chain breaks, 14", errs)
	}
}
