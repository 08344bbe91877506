package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/report"
)

func reportJSON(t *testing.T, args ...string) report.Report {
	t.Helper()
	var rep report.Report
	out := mustRun(t, "", append([]string{"report", "--format", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report --format json: %v\n%.500s", err, out)
	}
	return rep
}

func TestReportOfTheExampleCapture(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/incidents.jsonl") // applied=16 applied_late=1 duplicate=8 conflict=1 quarantined=0 malformed=3
	held := listHeld(t, cfg)
	mustRun(t, "", "quarantine", "discard", fmt.Sprint(held[0].ID), "--reason", "the producer's resend bug", "--operator", "a.reviewer", "-c", cfg)

	rep := reportJSON(t, "-c", cfg)
	t.Run("the totals are the ingest's summary", func(t *testing.T) {
		got := fmt.Sprintf("applied=%d applied_late=%d duplicate=%d conflict=%d quarantined=%d malformed=%d discarded=%d",
			rep.Totals.Applied, rep.Totals.AppliedLate, rep.Totals.Duplicate, rep.Totals.Conflict, rep.Totals.Quarantined, rep.Totals.Malformed, rep.Totals.Discarded)
		if want := "applied=16 applied_late=1 duplicate=8 conflict=1 quarantined=0 malformed=3 discarded=1"; got != want {
			t.Fatalf("%s, want %s", got, want)
		}
	})
	t.Run("the quarantine lists every held message, the discarded one with who and why", func(t *testing.T) {
		if len(rep.Quarantine) != len(held) {
			t.Fatalf("%d items, %d held", len(rep.Quarantine), len(held))
		}
		q := rep.Quarantine[0]
		if q.ID != held[0].ID || q.Status != "discarded" || q.Resolved.Operator != "a.reviewer" || q.Resolved.Reason != "the producer's resend bug" {
			t.Fatalf("%+v %+v", q, q.Resolved)
		}
		for _, q := range rep.Quarantine[1:] {
			if q.Status != "open" {
				t.Fatalf("%+v", q)
			}
		}
	})
	t.Run("the chain is verified and the configuration's digest is config print's", func(t *testing.T) {
		sum := sha256.Sum256([]byte(mustRun(t, "", "config", "print", "-c", cfg)))
		v := rep.Verification
		if !v.Intact || !v.HeadChecked || v.Chains[0].Records != 30 || rep.ConfigDigest != hex.EncodeToString(sum[:]) ||
			rep.Store != "embedded" || rep.ReadPath != "from the store" {
			t.Fatalf("%+v digest %s store %s %s", v, rep.ConfigDigest, rep.Store, rep.ReadPath)
		}
		if !strings.Contains(mustRun(t, "", "audit", "verify", "-c", cfg), "30 records") {
			t.Fatal("audit verify disagrees")
		}
	})
	t.Run("html goes to the file -o names", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report.html")
		if out := mustRun(t, "", "report", "-c", cfg, "-o", path); out != "" {
			t.Fatalf("stdout %q", out)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		page := string(b)
		if !strings.HasPrefix(page, "<!DOCTYPE html>") || strings.Contains(page, "http://") || strings.Contains(page, "https://") ||
			!strings.Contains(page, "a.reviewer") || !strings.Contains(page, rep.ConfigDigest) || !strings.Contains(page, `<svg id="timeline"`) {
			t.Fatalf("the page:\n%.2000s", page)
		}
	})
	t.Run("from, to and route select", func(t *testing.T) {
		if r := reportJSON(t, "-c", cfg, "--from", "1h"); r.Totals.Applied != 16 {
			t.Fatalf("--from 1h: %+v", r.Totals)
		}
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		if r := reportJSON(t, "-c", cfg, "--to", past); r.Totals.Total() != 0 || len(r.Quarantine) != 0 {
			t.Fatalf("--to an hour ago: %+v", r.Totals)
		}
		if r := reportJSON(t, "-c", cfg, "--route", "meters"); r.Totals.Total() != 0 || r.Route != "meters" {
			t.Fatalf("--route meters: %+v", r.Totals)
		}
	})
	t.Run("mistakes are named", func(t *testing.T) {
		for _, c := range []struct{ args, want string }{
			{"--from yesterday", "--from"},
			{"--from 1h --to 2h", "is not before"},
			{"--route nosuch", `--route "nosuch"`},
			{"--format pdf", "--format"},
		} {
			_, errs, code := cli(t, "", append([]string{"report", "-c", cfg}, strings.Fields(c.args)...)...)
			if code != 2 || !strings.Contains(errs, c.want) {
				t.Errorf("report %s: exit %d %q", c.args, code, errs)
			}
		}
	})
}

// TestReportOnASharedStore ingests the capture under two members of a
// group: the report verifies both chains and counts every decision once.
func TestReportOnASharedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and Redis")
	}
	for _, kind := range sharedKinds {
		t.Run(kind.name, func(t *testing.T) {
			groups := kind.groups(t)
			a, b := groups(t, "rep", "member: m-a"), groups(t, "rep", "member: m-b")
			mustRun(t, "", "ingest", "-c", a, "../../examples/incidents.jsonl")
			mustRun(t, "", "ingest", "-c", b, "../../examples/incidents.jsonl") // all replays: duplicates, conflicts and malformed again
			held := listHeld(t, a)
			mustRun(t, "", "quarantine", "discard", fmt.Sprint(held[len(held)-1].ID), "--reason", "noise", "--operator", "ops", "-c", a)
			rep := reportJSON(t, "-c", a)
			v := rep.Verification
			if !v.Intact || !v.HeadChecked || len(v.Chains) != 2 || v.Chains[0].Records+v.Chains[1].Records != 59 {
				t.Fatalf("verification %+v", v)
			}
			if rep.Totals.Applied+rep.Totals.AppliedLate != 17 || rep.Totals.Duplicate+rep.Totals.Conflict+rep.Totals.Malformed+rep.Totals.Quarantined != 41 {
				t.Fatalf("totals %+v", rep.Totals)
			}
			if len(rep.Quarantine) != len(held) {
				t.Fatalf("%d quarantine items, %d held", len(rep.Quarantine), len(held))
			}
			found := false
			for _, q := range rep.Quarantine {
				if q.ID == held[len(held)-1].ID {
					found = q.Status == "discarded" && q.Resolved.Operator == "ops" && q.Member == "m-b"
				}
			}
			if !found {
				t.Fatalf("the discarded entry #%d (member m-b) is not shown discarded: %+v", held[len(held)-1].ID, rep.Quarantine)
			}
		})
	}
}
