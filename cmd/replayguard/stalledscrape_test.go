package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// redisDaemon starts `replayguard run` as member a of the Redis r, with its
// API on listen, and publishes three incident updates it decides.
func redisDaemon(t *testing.T, r *testbroker.Redis) (listen string) {
	t.Helper()
	return sharedDaemon(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{stall}:", member: a, allow_not_durable: true, journal: {path: %q}}`,
		r.URL(), filepath.Join(t.TempDir(), "journal")))
}

// sharedDaemon starts `replayguard run` on the shared store the YAML store
// names, with its API on listen, and publishes three incident updates it
// decides.
func sharedDaemon(t *testing.T, store string) (listen string) {
	t.Helper()
	_, listen = sharedDaemonConfig(t, store)
	return listen
}

// sharedDaemonConfig is sharedDaemon, also returning the path of the
// member's configuration.
func sharedDaemonConfig(t *testing.T, store string) (cfg, listen string) {
	t.Helper()
	bin := buildBinary(t)
	cfg, listen, broker := daemonConfig(t, "")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "store:  {kind: embedded, path: "+filepath.Join(filepath.Dir(cfg), "data")+"}", "store: "+store, 1)
	if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	startRun(t, bin, cfg, listen)
	publishIncidents(t, broker, 3)
	return cfg, listen
}

// timedGet reads url with a client that gives up after limit, and returns
// the status, the body and how long it took.
func timedGet(t *testing.T, url string, limit time.Duration) (int, string, time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: limit}
	began := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v after %v", url, err, time.Since(began))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v after %v", url, err, time.Since(began))
	}
	return resp.StatusCode, string(body), time.Since(began)
}

// TestAScrapeOfAMemberWhoseRedisStoppedAnsweringAnswersWithinASecond runs a
// member on a Redis that is then paused (SIGSTOP: its connections stay open
// and nothing answers), and requires /metrics to answer within 1.5 s with
// the last counts read from the store, marked stale, and fresh counts once
// the server is resumed.
func TestAScrapeOfAMemberWhoseRedisStoppedAnsweringAnswersWithinASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, mosquitto and the daemon")
	}
	r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	listen := redisDaemon(t, r)
	url := "http://" + listen + "/metrics"
	waitMetric(t, url, "replayguard_decisions_total{outcome=\"applied\",route=\"incidents\"} 3")
	_, body, _ := timedGet(t, url, 10*time.Second)
	for _, want := range []string{"replayguard_gaps_open 0", "replayguard_quarantine_open 0"} {
		if !strings.Contains(body, want) {
			t.Fatalf("scrape of a member whose store answers lacks %q:\n%s", want, body)
		}
	}

	r.Pause()
	t.Cleanup(r.Resume)
	// The windows' last count is reused for twenty times what it took, so
	// the first scrapes may still show it as read for them; later ones
	// must say it is stale. Each scrape waits 0.5 s for the quarantine.
	for i := 0; ; i++ {
		code, body, took := timedGet(t, url, 5*time.Second)
		if code != http.StatusOK || took > 1500*time.Millisecond {
			t.Fatalf("scrape %d with the store paused: status %d after %v, want 200 within 1.5 s", i, code, took)
		}
		for _, want := range []string{"replayguard_gaps_open 0", "replayguard_quarantine_open 0",
			`replayguard_scrape_stale{metric="replayguard_quarantine_open"} 1`,
			`replayguard_decisions_total{outcome="applied",route="incidents"} 3`} {
			if !strings.Contains(body, want) {
				t.Fatalf("scrape %d with the store paused lacks %q:\n%s", i, want, body)
			}
		}
		if strings.Contains(body, `replayguard_scrape_stale{metric="replayguard_gaps_open"} 1`) {
			break
		}
		if i == 20 {
			t.Fatalf("%d scrapes with the store paused, none says gaps_open is stale:\n%s", i+1, body)
		}
	}

	r.Resume()
	waitMetric(t, url, `replayguard_scrape_stale{metric="replayguard_gaps_open"} 0`)
	waitMetric(t, url, `replayguard_scrape_stale{metric="replayguard_quarantine_open"} 0`)
}

// waitMetric scrapes url until its body holds line, for up to 10 s.
func waitMetric(t *testing.T, url, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for time.Now().Before(deadline) {
		if _, body, _ = timedGet(t, url, 5*time.Second); strings.Contains(body, line) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not show %q within 10 s:\n%s", url, line, body)
}
