package main

import (
	"os"
	"strings"
	"testing"
)

// report -o naming a directory is a command-line mistake, said before the
// report is read from the store, not a rename that fails at the end
// ("rename /.tmp.tmp-… /tmp: file exists").
func TestReportToADirectoryIsACommandLineMistake(t *testing.T) {
	cfg := testConfig(t, "")
	mustIngest(t, cfg, meterFeed(t, 0, 5))
	dir := t.TempDir()
	_, errs, code := cli(t, "", "report", "-o", dir, "-c", cfg)
	if code != exitUsage || !strings.Contains(errs, "-o "+dir+" is a directory: name the file to write") ||
		!strings.Contains(errs, "usage: replayguard report") {
		t.Fatalf("report -o DIR: exit %d, want %d saying %s is a directory\n%s", code, exitUsage, dir, errs)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("the directory holds %v (%v), want nothing written", left, err)
	}
}
