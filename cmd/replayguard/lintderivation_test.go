package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lint compares each route's key derivation with the one the store
// records, as run does at start, writing nothing: a change of the kind,
// the source paths, the sequence, the epoch or the id is a problem at the
// route, naming what changed (exit 1); a store not created yet, or a
// change of anything else, is none.
func TestLintNamesARouteWhoseKeyDerivationDiffersFromTheStoresRecord(t *testing.T) {
	dir := t.TempDir()
	conf := func(t *testing.T, store, routes string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "rg.yaml")
		body := "store: {kind: embedded, path: " + filepath.Join(dir, store) + "}\nmqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-1}\nroutes:\n" + routes
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const effects = "    effects:\n      - entity: \"incident/{incident_id}\"\n        add: {casualties: casualty_delta}\n"
	incidents := func(keys string) string {
		return "  - name: incidents\n    topic: incidents/#\n" + keys + effects
	}
	const sparkplug = "  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/#\n    effects:\n      - entity: \"meter/{topic[3]}\"\n        set: {kwh: metrics.Energy}\n"
	const plantJSON = "  - name: plant\n    topic: spBv1.0/plant/#\n    source: [\"topic[1]\", \"topic[3]\"]\n    sequence: seq\n    effects:\n      - entity: \"meter/{topic[3]}\"\n        set: {kwh: kwh}\n"
	base := incidents("    source: [agency, source_id]\n    sequence: sequence\n    epoch: boot_id\n")
	mustRun(t, "", "ingest", "-c", conf(t, "data", base+sparkplug), "/dev/null")
	for _, tc := range []struct {
		name, routes, says string // says "" when lint passes
	}{
		{"the recorded routes pass", base + sparkplug, ""},
		{"other effects and topic filter pass", "  - name: incidents\n    topic: incidents/+/#\n    source: [agency, source_id]\n    sequence: sequence\n    epoch: boot_id\n    effects:\n      - entity: \"unit/{unit_id}\"\n        set: {status: unit_status}\n", ""},
		{"a source path changed", incidents("    source: [agency, unit]\n    sequence: sequence\n    epoch: boot_id\n"), "source was [agency, source_id], now [agency, unit]"},
		{"the source order changed", incidents("    source: [source_id, agency]\n    sequence: sequence\n    epoch: boot_id\n"), "source was [agency, source_id], now [source_id, agency]"},
		{"another sequence", incidents("    source: [agency, source_id]\n    sequence: seq\n    epoch: boot_id\n"), "sequence was sequence, now seq"},
		{"the epoch dropped", incidents("    source: [agency, source_id]\n    sequence: sequence\n"), "epoch was boot_id, now none"},
		{"an id instead of a sequence", incidents("    source: [agency, source_id]\n    id: msgId\n"), "sequence was sequence, now none; epoch was boot_id, now none; id was none, now msgId"},
		{"another kind", plantJSON, "kind was sparkplug, now json; source was none, now [topic[1], topic[3]]; sequence was none, now seq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := cli(t, "", "lint", "-c", conf(t, "data", tc.routes))
			if tc.says == "" {
				if code != 0 || !strings.Contains(out, "ok") {
					t.Fatalf("exit %d, want 0\n%s%s", code, out, errs)
				}
				return
			}
			if code != 1 || !strings.Contains(errs, tc.says+": the store holds keys and source windows derived the recorded way, and run refuses the route") {
				t.Fatalf("exit %d, want 1 saying %q\n%s%s", code, tc.says, out, errs)
			}
		})
	}
	if _, errs, code := cli(t, "", "lint", "-c", conf(t, "fresh", plantJSON)); code != 0 {
		t.Fatalf("a store not created yet: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "fresh")); !os.IsNotExist(err) {
		t.Fatalf("lint created the store: %v", err)
	}
}
