package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// sharedKinds are the shared stores, each on a server of its own per test.
var sharedKinds = []struct {
	name   string
	groups func(t *testing.T) groupConfig
}{
	{"on PostgreSQL", postgresGroups},
	{"on Redis", redisGroups},
}

// TestIngestRefusesAMemberAnotherIngestHolds starts an ingest under a
// store.member and, while it runs, a second one under the same member: the
// second must fail at once naming the member, and write nothing.
func TestIngestRefusesAMemberAnotherIngestHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts PostgreSQL and Redis")
	}
	bin := buildBinary(t)
	feed := "../../examples/incidents.jsonl"
	for _, kind := range sharedKinds {
		t.Run(kind.name, func(t *testing.T) {
			cfg := kind.groups(t)(t, "held", "member: ingest-a")
			first, in, stdout := startIngestOnStdin(t, bin, cfg, "ingest-a")

			var stderr bytes.Buffer
			second := exec.Command(bin, "ingest", "-c", cfg, feed)
			second.Stderr = &stderr
			err := second.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("a second ingest under the held member: %v, want exit status 1\n%s", err, stderr.String())
			}
			msg := stderr.String()
			if !strings.Contains(msg, `member "ingest-a"`) || !strings.Contains(msg, "held") {
				t.Fatalf("a second ingest under the held member said %q; want the member named as held", msg)
			}
			t.Logf("refused: %s", strings.TrimSpace(msg))
			if got := runBin(t, bin, "audit", "export", "-c", cfg); got != "" {
				t.Fatalf("the refused ingest left audit records:\n%.500s", got)
			}

			// The first goes on; once it has ended cleanly the member is free.
			io.WriteString(in, `{"topic":"plant/m1/energy","payload":{"msgId":"m-1","kwh":0.5}}`+"\n")
			in.Close()
			if err := first.Wait(); err != nil {
				t.Fatalf("the first ingest: %v", err)
			}
			if want := "applied=1 applied_late=0 duplicate=0 conflict=0 quarantined=0 malformed=0 total=1\n"; stdout.String() != want {
				t.Fatalf("the first ingest printed %q, want %q", stdout.String(), want)
			}
			if out := runBin(t, bin, "ingest", "-c", cfg, feed); !strings.HasPrefix(out, "applied=16 ") {
				t.Fatalf("an ingest after the first ended: %q", out)
			}
		})
	}
}

// startIngestOnStdin starts `ingest -` and waits until it names the member
// whose chain it writes: by then it holds the member's lease. The test
// writes the capture to in and closes it.
func startIngestOnStdin(t *testing.T, bin, cfg, member string) (*exec.Cmd, io.WriteCloser, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, "ingest", "-c", cfg, "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	named := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errs)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if memberNamed(sc.Text()) == member {
				named <- ""
				io.Copy(io.Discard, errs)
				return
			}
		}
		named <- all.String()
	}()
	select {
	case out := <-named:
		if out != "" {
			t.Fatalf("ingest ended before it named member %s:\n%s", member, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("ingest did not name member %s within 10s", member)
	}
	return cmd, in, &stdout
}

// TestIngestRefusesAStoreThatCanLoseACommit runs ingest on servers that
// may lose an acknowledged commit: it must fail naming the setting, and
// write nothing.
func TestIngestRefusesAStoreThatCanLoseACommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts PostgreSQL and Redis")
	}
	bin := buildBinary(t)
	feed := "../../examples/incidents.jsonl"
	for _, tt := range []struct {
		name    string
		store   func(t *testing.T) string // the store section
		setting string
	}{
		{"PostgreSQL with synchronous_commit off", func(t *testing.T) string {
			pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{"synchronous_commit=off"}})
			return fmt.Sprintf("{kind: postgres, url: %q}", pg.URL())
		}, "synchronous_commit"},
		{"Redis without an append-only file", func(t *testing.T) string {
			r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
			return fmt.Sprintf("{kind: redis, url: %q}", r.URL())
		}, "appendonly"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := storeConfig(t, tt.store(t))
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "ingest", "-c", cfg, feed)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("ingest: %v, want exit status 1\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.setting) {
				t.Fatalf("ingest said %q; want the setting %s named", stderr.String(), tt.setting)
			}
			t.Logf("refused: %s", strings.TrimSpace(stderr.String()))
		})
	}
}

// A second run given the same file on a shared store, with store.member
// unset, is refused as a member another process holds; the refusal says
// where that member id came from and what to set, since members of a
// JetStream group, or processes given one file, share the setting it is
// taken from.
func TestASecondRunUnderADerivedMemberIDNamesStoreMember(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis and Mosquitto")
	}
	bin := buildBinary(t)
	cfg, listen, _ := daemonConfig(t, "")
	r := testbroker.StartRedis(t, testbroker.RedisOptions{})
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := withJournal(fmt.Sprintf(`{kind: redis, url: %q, prefix: "{g}:"}`, r.URL()), filepath.Join(filepath.Dir(cfg), "journal"))
	text := regexp.MustCompile(`(?m)^store:.*$`).ReplaceAllLiteralString(string(b), "store: "+store)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	startRun(t, bin, cfg, listen)

	second := exec.Command(bin, "run", "-c", cfg)
	var stderr bytes.Buffer
	second.Stderr = &stderr
	err = second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("a second run under the same member: %v, want exit status 1\n%s", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "held") || !strings.Contains(msg, `store.member is unset, so the member id is mqtt.client_id "replayguard-example-1"`) {
		t.Fatalf("a second run under the same member said %q; want it to name mqtt.client_id and store.member", msg)
	}
}
