package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// A member's `run` that stalled past its lease while the member was
// started again elsewhere (a paused VM, a second host given the same
// client id) can commit nothing when it resumes: the store fences it. It
// stops with an error that says so, rather than sit not ready holding the
// deliveries the broker deals it, and taking the broker session of the
// same client id back from the member's live process at each reconnect.
// The live process goes on, and every update is applied once.
func TestARunWhoseMemberWasTakenOverStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts PostgreSQL and waits out a member's lease")
	}
	bin := buildBinary(t)
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	cfg, listen, broker := daemonConfig(t, "")
	secondListen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	secondCfg := setStore(t, cfg, fmt.Sprintf("{kind: postgres, url: %q, schema: fenced}", pg.URL()), listen, secondListen)
	setStore(t, cfg, fmt.Sprintf("{kind: postgres, url: %q, schema: fenced}", pg.URL()), "", "")

	stalled, stalledExited := startRun(t, bin, cfg, listen)
	publishIncidents(t, broker, 5)
	waitFor(t, "the first five updates applied", 15*time.Second, func() bool { return casualties(t, bin, cfg) == "5" })
	if err := stalled.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(postgres.DefaultLeaseTTL + 2*time.Second)
	live, liveExited := startRun(t, bin, secondCfg, secondListen)
	if err := stalled.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stalledExited:
		if err == nil {
			t.Fatal("the fenced run exited 0")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the fenced run still runs 30 s after it resumed")
	}
	log, _ := os.ReadFile(stalled.Stdout.(*os.File).Name())
	if !strings.Contains(string(log), "stopping: the store no longer lets this process write as its member") || !strings.Contains(string(log), "lost its lease") {
		t.Errorf("the fenced run's log does not say why it stopped:\n%s", log)
	}
	waitHTTP(t, "http://"+secondListen+"/readyz")
	publishIncidentsOf(t, broker, "e2", 5)
	waitFor(t, "every update applied once", 30*time.Second, func() bool { return casualties(t, bin, secondCfg) == "10" })
	stopRun(t, live, liveExited)
	if got := casualties(t, bin, secondCfg); got != "10" {
		t.Fatalf("casualties %s after the stop, want 10", got)
	}
}

// casualties reads incident/I1's casualties from the store of cfg.
func casualties(t *testing.T, bin, cfg string) string {
	t.Helper()
	var state map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(runBin(t, bin, "state", "--json", "-c", cfg)), &state); err != nil {
		t.Fatal(err)
	}
	return string(state["incident/I1"]["casualties"])
}

// waitFor polls cond every 100 ms and fails the test unless it holds
// within timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// With store.member set, a command that writes as the member (a
// quarantine release, an outbox retry) while the member's `run` holds it
// goes through that run's API, as it does on an embedded store run holds;
// it was refused with the member held.
func TestACommandOfANamedMemberGoesThroughItsRunsAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts PostgreSQL and Mosquitto")
	}
	bin := buildBinary(t)
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	cfg, listen, broker := daemonConfig(t, "")
	setStore(t, cfg, fmt.Sprintf("{kind: postgres, url: %q, schema: named, member: rg-1}", pg.URL()), "", "")
	daemon, exited := startRun(t, bin, cfg, listen)
	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src },
		Payload: func(src string, seq int64) []byte {
			if seq == 2 { // sequence 3 below comes after 80, beyond the 64-sequence window: held
				seq = 80
			}
			return fmt.Appendf(nil, `{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"I1","casualty_delta":1}`, src, seq)
		},
	})
	if n := pub.Publish(t.Context(), "e1", 3); n != 3 {
		t.Fatalf("%d of 3 publishes acknowledged", n)
	}
	var entries []held
	waitFor(t, "the late update held", 15*time.Second, func() bool { entries = listHeld(t, cfg); return len(entries) == 1 })
	out, errs, code := cli(t, "", "quarantine", "release", fmt.Sprint(entries[0].ID), "-c", cfg)
	if code != 0 || !strings.Contains(out, "released: applied") {
		t.Fatalf("release while rg-1 runs: exit %d, %q\n%s", code, out, errs)
	}
	if got := casualties(t, bin, cfg); got != "3" {
		t.Fatalf("casualties %s after the release, want 3", got)
	}
	stopRun(t, daemon, exited)
}

// setStore writes the configuration file cfg with store in place of its
// store, a journal of its own beside it, and listen in place of from (none
// when from is ""): in place when listen is "", else into a copy, whose
// path it returns.
func setStore(t *testing.T, cfg, store, from, listen string) string {
	t.Helper()
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := cfg
	if listen != "" {
		path = filepath.Join(t.TempDir(), "replayguard.yaml")
		text = []byte(strings.Replace(string(text), from, listen, 1))
	}
	store = "store: " + withJournal(store, filepath.Join(filepath.Dir(path), "journal"))
	if err := os.WriteFile(path, regexp.MustCompile(`(?m)^store:.*$`).ReplaceAllLiteral(text, []byte(store)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
