package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestRunServesTheCLIWhileItHoldsTheStore runs the daemon against a real
// Mosquitto and checks that the read and review commands, which cannot
// open the locked store, answer through its API with the same output.
func TestRunServesTheCLIWhileItHoldsTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	bin := buildBinary(t)
	cfg, listen, broker := daemonConfig(t, "")

	daemon, exited := startRun(t, bin, cfg, listen)

	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src },
		Payload: func(src string, seq int64) []byte {
			if seq == 2 { // skipped by the producer's own resend: sequence 2 below is a late one
				seq = 80
			}
			return fmt.Appendf(nil, `{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"I1","casualty_delta":1}`, src, seq)
		},
	})
	if n := pub.Publish(context.Background(), "e1", 3); n != 3 {
		t.Fatalf("%d of 3 publishes acknowledged", n)
	}
	// sequence 3 arrives after 80, beyond the 64-sequence window: quarantined
	deadline := time.Now().Add(10 * time.Second)
	var held []held
	for time.Now().Before(deadline) {
		if held = listHeld(t, cfg); len(held) == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(held) != 1 || held[0].Reason != "below_window" {
		t.Fatalf("held through the API: %+v", held)
	}
	if got := mustRun(t, "", "state", "--json", "-c", cfg); !strings.Contains(got, `"casualties": 2`) {
		t.Fatalf("state through the API: %s", got)
	}
	// Without tokens (open writes on loopback) the release names the
	// operator the command gives, as it does on a local store.
	if out := mustRun(t, "", "quarantine", "release", fmt.Sprint(held[0].ID), "--operator", "duty officer", "-c", cfg); !strings.Contains(out, "released: applied") {
		t.Fatalf("release through the API: %q", out)
	}
	// Through the API too, an entry not held is reported and the next
	// one is tried.
	if _, errs, code := cli(t, "", "quarantine", "discard", fmt.Sprint(held[0].ID), "999", "--reason", "r", "-c", cfg); code != 1 ||
		!strings.Contains(errs, fmt.Sprintf("no quarantined message #%d\n", held[0].ID)) || !strings.Contains(errs, "no quarantined message #999\n") {
		t.Fatalf("discard of two entries not held through the API: exit %d %s", code, errs)
	}
	if exported := mustRun(t, "", "audit", "export", "-c", cfg); !strings.Contains(exported, `"operator":"duty officer"`) {
		t.Fatalf("the release's audit record does not name its operator:\n%s", exported)
	}
	remoteState := mustRun(t, "", "state", "--json", "-c", cfg)
	if !strings.Contains(remoteState, `"casualties": 3`) {
		t.Fatalf("state after the release: %s", remoteState)
	}
	remoteSources := mustRun(t, "", "sources", "-c", cfg)
	if out := mustRun(t, "", "audit", "verify", "-c", cfg); out != "audit chain intact: 4 records\n" {
		t.Fatalf("audit verify through the API: %q", out)
	}
	if rep := reportJSON(t, "-c", cfg); !strings.Contains(rep.ReadPath, "through the API") || !rep.Verification.Intact || !rep.Verification.HeadChecked ||
		rep.Verification.Chains[0].Records != 4 || len(rep.Quarantine) != 1 || rep.Quarantine[0].Status != "released" {
		t.Fatalf("report through the API: %+v", rep)
	}
	// explain reads the log through the API, and the daemon serves the
	// lineage itself: three adds, the released one naming its entry.
	remoteLineage := mustRun(t, "", "explain", "incident/I1", "--json", "-c", cfg)
	if l := explainJSON(t, "incident/I1", "-c", cfg); len(l.Changes) != 3 || string(l.State["casualties"]) != "3" || l.Changes[2].Ref != held[0].ID {
		t.Fatalf("explain through the API: %s", remoteLineage)
	}
	resp, err := http.Get("http://" + listen + "/api/v1/explain/incident/I1?field=casualties")
	if err != nil {
		t.Fatal(err)
	}
	var served report.Lineage
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil || resp.StatusCode != http.StatusOK || len(served.Changes) != 3 {
		t.Fatalf("GET /api/v1/explain: %d, %v, %+v", resp.StatusCode, err, served)
	}
	resp.Body.Close()

	stopRun(t, daemon, exited)
	if local := mustRun(t, "", "state", "--json", "-c", cfg); local != remoteState {
		t.Fatalf("state read from the store %s differs from the API's %s", local, remoteState)
	}
	if local := mustRun(t, "", "explain", "incident/I1", "--json", "-c", cfg); local != remoteLineage {
		t.Fatalf("the lineage read from the store %s differs from the API's %s", local, remoteLineage)
	}
	if local := mustRun(t, "", "sources", "-c", cfg); local != remoteSources {
		t.Fatalf("sources read from the store %q differ from the API's %q", local, remoteSources)
	}
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 15 s", url)
}

// daemonConfig writes the test configuration with extra, consuming from a
// Mosquitto of its own and serving the API on a free port.
func daemonConfig(t *testing.T, extra string) (cfg, listen string, broker *testbroker.Mosquitto) {
	t.Helper()
	broker = testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	listen = fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	cfg = testConfig(t, extra)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "tcp://127.0.0.1:1883", broker.URL(), 1)
	text = strings.Replace(text, "127.0.0.1:9780", listen, 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, listen, broker
}

// publishIncidents publishes sequences 1..n of one fire engine's incident
// updates, each adding a casualty, and requires every one acknowledged.
func publishIncidents(t *testing.T, broker *testbroker.Mosquitto, n int) {
	t.Helper()
	publishIncidentsOf(t, broker, "e1", n)
}

// publishIncidentsOf is publishIncidents of the fire engine src.
func publishIncidentsOf(t *testing.T, broker *testbroker.Mosquitto, src string, n int) {
	t.Helper()
	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src },
		Payload: func(src string, seq int64) []byte {
			return fmt.Appendf(nil, `{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"I1","casualty_delta":1}`, src, seq)
		},
	})
	if got := pub.Publish(context.Background(), src, n); got != n {
		t.Fatalf("%d of %d publishes acknowledged", got, n)
	}
}

// stopRun sends the daemon SIGTERM and requires a clean exit within 15 s.
func stopRun(t *testing.T, daemon *exec.Cmd, exited <-chan error) {
	t.Helper()
	daemon.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("run after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop within 15 s of SIGTERM")
	}
}

// startRun starts `replayguard run -c cfg` and waits until its API on
// listen says it is ready. The process is killed at cleanup, and its log
// printed when the test failed; exited receives what Wait returns.
func startRun(t *testing.T, bin, cfg, listen string) (daemon *exec.Cmd, exited <-chan error) {
	t.Helper()
	daemon, exited, _ = startRunLogged(t, bin, cfg, listen)
	return daemon, exited
}

// startRunLogged is startRun, also returning the file run logs to.
func startRunLogged(t *testing.T, bin, cfg, listen string) (daemon *exec.Cmd, exited <-chan error, logPath string) {
	t.Helper()
	daemon = exec.Command(bin, "run", "-c", cfg)
	logs, _ := os.Create(filepath.Join(t.TempDir(), "run.log"))
	daemon.Stdout, daemon.Stderr = logs, logs
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	t.Cleanup(func() {
		daemon.Process.Kill()
		if t.Failed() {
			out, _ := os.ReadFile(logs.Name())
			t.Logf("daemon log:\n%s", out)
		}
	})
	waitHTTP(t, "http://"+listen+"/readyz")
	return daemon, done, logs.Name()
}
