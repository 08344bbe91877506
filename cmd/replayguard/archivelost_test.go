package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestRetentionNeverOverwritesTheArchiveOfAChainTheStoreLost runs a member
// with audit retention on a Redis that keeps nothing on disk
// (store.allow_not_durable), restarts the server, which loses every chain,
// and ingests again: the member's chain begins again at position 1, and
// retention must refuse to archive it over the sealed segments of the
// chain the store lost, naming them, rather than delete them.
func TestRetentionNeverOverwritesTheArchiveOfAChainTheStoreLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	cfg := testConfig(t, "")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf(`{kind: redis, url: %q, prefix: "{lost}:", member: a, allow_not_durable: true}`, r.URL())
	archive := filepath.Join(t.TempDir(), "archive")
	s := strings.Replace(string(b), "store:  {kind: embedded, path: "+filepath.Join(filepath.Dir(cfg), "data")+"}", "store: "+store, 1)
	s += fmt.Sprintf("audit: {retention: {max_records: 10}, archive: %s}\n", archive)
	if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := cli(t, "", "ingest", "-c", cfg, "--batch", "10", meterFeed(t, 0, 100))
	if code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, errs)
	}
	mustSay(t, errs, "audit retention: 90 records of member a's chain archived")
	sealed := filepath.Join(archive, "member-a", "audit-00000000000000000001-00000000000000000090.manifest.json")
	before, err := os.ReadFile(sealed)
	if err != nil {
		t.Fatal(err)
	}

	r.Kill()
	r.Restart() // nothing on disk: every chain is gone
	_, errs, code = cli(t, "", "ingest", "-c", cfg, "--batch", "10", meterFeed(t, 1000, 50))
	if code == 0 || !strings.Contains(errs, "audit-00000000000000000001-00000000000000000090") {
		t.Errorf("ingest on the store that lost the chain: exit %d, want an error naming the sealed segment:\n%s", code, errs)
	}
	if after, err := os.ReadFile(sealed); err != nil || string(after) != string(before) {
		t.Fatalf("the sealed segment's manifest after retention on the lost chain: %v\n%s", err, after)
	}
}
