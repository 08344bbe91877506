package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyNamesAnArchiveDirectoryThatIsNotThere: --archive naming a
// directory that does not exist (a typo, an unmounted volume) is said as
// such, not reported as a chain whose archived segments were removed.
func TestVerifyNamesAnArchiveDirectoryThatIsNotThere(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_records: 500}, archive: %s}\n", archive))
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 3000))
	typo := archive + "s"
	_, errs, code := cli(t, "", "audit", "verify", "--archive", typo, "-c", cfg)
	if code == 0 || strings.Contains(errs, "segment is missing") || strings.Contains(errs, "broken") || !strings.Contains(errs, typo) {
		t.Fatalf("verify --archive %s (no such directory): exit %d\n%s\nwant an error naming the directory, not a broken chain", typo, code, errs)
	}
}
