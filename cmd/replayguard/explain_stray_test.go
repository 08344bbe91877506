package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestExplainOnAGroupHoldingRecordsOutsideEveryChainIsAnError: a shared
// store that holds records of a chain it no longer lists (its head
// removed) would give a lineage without that chain's changes; explain
// must say the chain is broken, naming it, never print the shorter
// lineage, and so must a report asked for that entity's lineage.
func TestExplainOnAGroupHoldingRecordsOutsideEveryChainIsAnError(t *testing.T) {
	r := testbroker.StartRedis(t, testbroker.RedisOptions{})
	cfg := map[string]string{}
	for i, m := range []string{"m1", "m2"} {
		cfg[m] = storeConfig(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{explain}:", member: %s}`, r.URL(), m))
		mustRun(t, "", "ingest", "-c", cfg[m], meterFeed(t, 100*i, 30))
	}
	if out := mustRun(t, "", "explain", "meter/meter-3", "-c", cfg["m1"]); !strings.HasPrefix(out, "meter/meter-3: 60 changes") {
		t.Fatalf("explain before the change: %q", out)
	}
	if _, err := r.Do("HDEL", "{explain}:heads", "m2"); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cli(t, "", "explain", "meter/meter-3", "-c", cfg["m1"])
	if code != 1 || !strings.Contains(errs, "member m2") || out != "" {
		t.Errorf("explain of a store holding records outside every chain: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := cli(t, "", "report", "--entity", "meter/meter-3", "--format", "json", "-c", cfg["m1"]); code != 1 || !strings.Contains(errs, "member m2") {
		t.Errorf("report --entity of a store holding records outside every chain: exit %d %s", code, errs)
	}
}
