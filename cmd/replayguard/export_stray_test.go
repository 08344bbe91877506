package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAuditExportOfAGroupHoldingRecordsOutsideEveryChainFails: a shared
// store that holds records of a chain it no longer lists (its head
// removed) cannot export them with the chains it lists; the export writes
// those chains and then fails naming the chain it left out, never a
// smaller log ending in success.
func TestAuditExportOfAGroupHoldingRecordsOutsideEveryChainFails(t *testing.T) {
	r := testbroker.StartRedis(t, testbroker.RedisOptions{})
	cfg := map[string]string{}
	for i, m := range []string{"m1", "m2"} {
		cfg[m] = storeConfig(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{export}:", member: %s}`, r.URL(), m))
		mustRun(t, "", "ingest", "-c", cfg[m], meterFeed(t, 100*i, 30))
	}
	if _, err := r.Do("HDEL", "{export}:heads", "m2"); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cli(t, "", "audit", "export", "-c", cfg["m1"])
	if code != 1 || !strings.Contains(errs, "member m2") || !strings.Contains(errs, "not in the export") {
		t.Errorf("audit export of a store holding records outside every chain: exit %d %s", code, errs)
	}
	if n := strings.Count(out, "\n"); n != 30 {
		t.Errorf("audit export wrote %d records, want m1's 30", n)
	}
}
