package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestSharedStoreAuditRetentionAndSinksSurviveAKilledMember runs three
// ingests on a shared store with audit retention (50 records kept per
// chain), an archive and a file sink: a clean one; one killed with SIGKILL
// after it committed 200 records, delivered and trimmed nothing, and then
// the store's server is killed and restarted; and, once the killed
// member's lease expired, a third that takes over its chain. Every
// member's archive and stored chain must then verify as one chain, and
// the file sink hold every record of every chain once, in order.
func TestSharedStoreAuditRetentionAndSinksSurviveAKilledMember(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts PostgreSQL and Redis and waits out a member's lease")
	}
	bin := buildBinary(t)
	for _, kind := range []struct {
		name  string
		start func(t *testing.T) (store string, crash func())
	}{
		{"on PostgreSQL", func(t *testing.T) (string, func()) {
			pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
			return fmt.Sprintf("{kind: postgres, url: %q, schema: audit}", pg.URL()), func() { pg.Kill(); pg.Restart() }
		}},
		{"on Redis", func(t *testing.T) (string, func()) {
			r := testbroker.StartRedis(t, testbroker.RedisOptions{})
			return fmt.Sprintf(`{kind: redis, url: %q, prefix: "{audit}:"}`, r.URL()), func() { r.Kill(); r.Restart() }
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			store, crash := kind.start(t)
			cfg := storeConfig(t, store)
			dir := t.TempDir()
			archive, sinkFile := filepath.Join(dir, "archive"), filepath.Join(dir, "audit.jsonl")
			appendConfig(t, cfg, fmt.Sprintf("audit: {retention: {max_records: 50}, archive: %s, sinks: [{name: jsonl, kind: file, path: %s}]}\n", archive, sinkFile))

			errs := runBinStderr(t, bin, "ingest", "-c", cfg, "--batch", "40", meterFeed(t, 0, 300))
			first := memberNamed(errs)
			mustSay(t, errs, fmt.Sprintf("audit retention: 250 records of member %s's chain archived in 1 segment", first))

			killed := ingestKilledAfter(t, bin, cfg, 200)
			crash() // the store's server dies and comes back: the chains and cursors are durable
			time.Sleep(postgres.DefaultLeaseTTL + 2*time.Second)

			errs = runBinStderr(t, bin, "ingest", "-c", cfg, "--batch", "40", meterFeed(t, 1000, 100))
			last := memberNamed(errs)
			mustSay(t, errs, fmt.Sprintf("audit retention: 150 records of member %s's chain archived in 1 segment", killed))
			mustSay(t, errs, fmt.Sprintf("audit retention: 50 records of member %s's chain archived in 1 segment", last))

			heads := map[string]uint64{first: 300, killed: 200, last: 100}
			checkSinkChains(t, sinkFile, heads)
			members := slices.Sorted(maps.Keys(heads))
			var want strings.Builder
			for _, m := range members {
				fmt.Fprintf(&want, "member %s: archive: 1 segment, positions 1..%d intact; store: positions %d..%d intact; %d records as one chain\n",
					m, heads[m]-50, heads[m]-49, heads[m], heads[m])
			}
			want.WriteString("audit chains intact: 3 members, 600 records, archive and store as one chain each\n")
			if out := runBin(t, bin, "audit", "verify", "--archive", archive, "-c", cfg); out != want.String() {
				t.Fatalf("audit verify --archive:\n%s\nwant\n%s", out, want.String())
			}
			out := runBin(t, bin, "audit", "verify", "-c", cfg)
			for _, m := range members {
				mustSay(t, out, fmt.Sprintf("member %s: audit chain intact from the store's base: 50 records, positions %d..%d (1..%d were archived by retention",
					m, heads[m]-49, heads[m], heads[m]-50))
			}
			mustSay(t, out, "audit chains intact: 3 members, 150 records\n")
			if n := len(jsonLines(runBin(t, bin, "audit", "export", "-c", cfg))); n != 150 {
				t.Fatalf("audit export wrote %d records, want the 150 the store keeps", n)
			}

			// A segment of the killed member's chain gone is named, with its member.
			removed, _ := filepath.Glob(filepath.Join(archive, "member-"+killed, "audit-00000000000000000001-*"))
			for _, f := range removed {
				os.Remove(f)
			}
			var stderr strings.Builder
			cmd := exec.Command(bin, "audit", "verify", "--archive", archive, "-c", cfg)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), fmt.Sprintf("audit chain of member %s broken at position 1: positions 1..150", killed)) {
				t.Fatalf("verify --archive with a segment gone: %v\n%s", err, stderr.String())
			}
		})
	}
}

// appendConfig appends yaml to the configuration file cfg.
func appendConfig(t *testing.T, cfg, yaml string) {
	t.Helper()
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(yaml); err != nil {
		t.Fatal(err)
	}
}

// runBinStderr runs the binary, which must succeed, and returns its stderr.
func runBinStderr(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replayguard %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("replayguard %s:\n%s", args[0], stderr.String())
	return stderr.String()
}

func mustSay(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("the output does not say %q:\n%s", want, got)
	}
}

// ingestKilledAfter starts an ingest of readings on its standard input, 10
// to a commit, feeds it n, and kills it with SIGKILL once the store holds
// all n records of its chain: it delivered and trimmed nothing (an ingest
// does both at its end). It returns the ingest's member.
func ingestKilledAfter(t *testing.T, bin, cfg string, n int) string {
	t.Helper()
	cmd := exec.Command(bin, "ingest", "-c", cfg, "--batch", "10", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	named := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errs)
		for sc.Scan() {
			if m := memberNamed(sc.Text()); m != "" {
				named <- m
				break
			}
		}
		io.Copy(io.Discard, errs)
	}()
	var member string
	select {
	case member = <-named:
	case <-time.After(10 * time.Second):
		t.Fatal("the ingest named no member within 10s")
	}
	for i := range n {
		fmt.Fprintf(in, `{"topic":"plant/meter-3/energy","payload":{"msgId":"k-%d","kwh":0.25}}`+"\n", i)
	}
	deadline := time.Now().Add(20 * time.Second)
	for chainRecords(t, bin, cfg, member) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the ingest's chain holds %d of its %d records after 20s", chainRecords(t, bin, cfg, member), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	return member
}

// chainRecords counts member's records that audit export writes.
func chainRecords(t *testing.T, bin, cfg, member string) int {
	t.Helper()
	n := 0
	for _, line := range jsonLines(runBin(t, bin, "audit", "export", "-c", cfg)) {
		var rec struct{ Member string }
		json.Unmarshal([]byte(line), &rec)
		if rec.Member == member {
			n++
		}
	}
	return n
}

// checkSinkChains checks that the file sink holds each member's chain
// exactly once, positions 1..heads[member] in order, and nothing else.
func checkSinkChains(t *testing.T, path string, heads map[string]uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint64{}
	for _, line := range jsonLines(string(b)) {
		var rec struct {
			Member   string
			Position uint64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("the sink's file: %v: %.200s", err, line)
		}
		got[rec.Member] = append(got[rec.Member], rec.Position)
	}
	for m, head := range heads {
		want := make([]uint64, head)
		for i := range want {
			want[i] = uint64(i + 1)
		}
		if !slices.Equal(got[m], want) {
			t.Errorf("the sink holds member %s's positions %v; want 1..%d once each, in order", m, got[m], head)
		}
	}
	if len(got) != len(heads) {
		t.Errorf("the sink holds the chains of %d members, want %d", len(got), len(heads))
	}
}
