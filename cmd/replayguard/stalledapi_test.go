package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAnAPIReadOfAMemberWhosePostgreSQLStoppedAnsweringFailsWithinItsTimeout
// runs a member on a PostgreSQL that is then paused (SIGSTOP of the
// postmaster and every backend: connections stay open, nothing answers),
// and requires each read the dashboard polls to answer 503 within the
// 5 s store read timeout (with a second's grace), and 200 again once the
// server is resumed.
func TestAnAPIReadOfAMemberWhosePostgreSQLStoppedAnsweringFailsWithinItsTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, mosquitto and the daemon")
	}
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	listen := sharedDaemon(t, fmt.Sprintf(`{kind: postgres, url: %q, member: a, journal: {path: %q}}`,
		pg.URL(), filepath.Join(t.TempDir(), "journal")))
	waitMetric(t, "http://"+listen+"/metrics", `replayguard_decisions_total{outcome="applied",route="incidents"} 3`)
	reads := []string{"/api/v1/state", "/api/v1/sources", "/api/v1/audit", "/api/v1/quarantine", "/api/v1/outbox"}

	pg.Pause()
	t.Cleanup(pg.Resume)
	readsAnswer503(t, listen, reads, 0, 6*time.Second)
	code, _, took := timedGet(t, "http://"+listen+"/metrics", 5*time.Second)
	if code != http.StatusOK || took > 1500*time.Millisecond {
		t.Errorf("scrape with the store paused: status %d after %v, want 200 within 1.5 s", code, took)
	}

	pg.Resume()
	readsAnswer200(t, listen, reads)
}

// TestAnAPIReadOfAMemberWhoseRedisTimedOutAnswers503 runs a member on a
// Redis that is then paused (SIGSTOP: its connections stay open, nothing
// answers), with the Redis client's own read timeout (read_timeout in
// store.url) shorter than the API's store read timeout, and requires each
// read the dashboard polls to answer 503, as a read that outlives the
// API's bound does, within that bound (with a second's grace), and 200
// again once the server is resumed.
func TestAnAPIReadOfAMemberWhoseRedisTimedOutAnswers503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, mosquitto and the daemon")
	}
	r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	listen := sharedDaemon(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{stall}:", member: a, allow_not_durable: true, journal: {path: %q}}`,
		r.URL()+"?read_timeout=1s", filepath.Join(t.TempDir(), "journal")))
	waitMetric(t, "http://"+listen+"/metrics", `replayguard_decisions_total{outcome="applied",route="incidents"} 3`)
	reads := []string{"/api/v1/state", "/api/v1/sources", "/api/v1/audit", "/api/v1/quarantine", "/api/v1/outbox",
		"/api/v1/explain/incident/I1"}

	r.Pause()
	t.Cleanup(r.Resume)
	readsAnswer503(t, listen, reads, 0, 6*time.Second)

	r.Resume()
	readsAnswer200(t, listen, reads)
}

// TestTheStoreReadTimeoutOfTheFileBoundsAPIReads runs a member whose file
// sets store.read_timeout: 1s on a Redis that is then paused, and requires
// each read the dashboard polls to answer 503 after that second (not the
// default 5 s), with half a second's grace.
func TestTheStoreReadTimeoutOfTheFileBoundsAPIReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, mosquitto and the daemon")
	}
	r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	listen := sharedDaemon(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{stall}:", member: a, allow_not_durable: true, read_timeout: 1s, journal: {path: %q}}`,
		r.URL(), filepath.Join(t.TempDir(), "journal")))
	waitMetric(t, "http://"+listen+"/metrics", `replayguard_decisions_total{outcome="applied",route="incidents"} 3`)

	r.Pause()
	t.Cleanup(r.Resume)
	readsAnswer503(t, listen, []string{"/api/v1/state", "/api/v1/sources", "/api/v1/audit", "/api/v1/quarantine", "/api/v1/outbox",
		"/api/v1/explain/incident/I1"}, time.Second, 1500*time.Millisecond)
}

// TestAnAPIReadOfAMemberWhoseStoreIsDownAnswers503 runs a member on a
// PostgreSQL and on a Redis that is then stopped (its connections closed,
// new ones refused), and requires each read the dashboard polls to answer
// 503, as for a store that does not answer, not 500.
func TestAnAPIReadOfAMemberWhoseStoreIsDownAnswers503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, Redis, mosquitto and the daemon")
	}
	reads := []string{"/api/v1/state", "/api/v1/sources", "/api/v1/audit", "/api/v1/quarantine", "/api/v1/outbox",
		"/api/v1/explain/incident/I1"}
	t.Run("postgres", func(t *testing.T) {
		pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		listen := sharedDaemon(t, fmt.Sprintf(`{kind: postgres, url: %q, member: a, journal: {path: %q}}`,
			pg.URL(), filepath.Join(t.TempDir(), "journal")))
		waitMetric(t, "http://"+listen+"/metrics", `replayguard_decisions_total{outcome="applied",route="incidents"} 3`)
		pg.Stop()
		readsAnswer503(t, listen, reads, 0, 6*time.Second)
	})
	t.Run("redis", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
		listen := sharedDaemon(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{down}:", member: a, allow_not_durable: true, journal: {path: %q}}`,
			r.URL(), filepath.Join(t.TempDir(), "journal")))
		waitMetric(t, "http://"+listen+"/metrics", `replayguard_decisions_total{outcome="applied",route="incidents"} 3`)
		r.Stop()
		readsAnswer503(t, listen, reads, 0, 6*time.Second)
	})
}

// TestStoreLossWithTheStoreDownAsksTheRunningMember: with the store
// stopped, `store loss` cannot open it, and answers from the running
// member's API, which knows what it lost.
func TestStoreLossWithTheStoreDownAsksTheRunningMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, mosquitto and the daemon")
	}
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	cfg, listen := sharedDaemonConfig(t, fmt.Sprintf(`{kind: postgres, url: %q, member: a, journal: {path: %q}}`,
		pg.URL(), filepath.Join(t.TempDir(), "journal")))
	waitMetric(t, "http://"+listen+"/metrics", `replayguard_decisions_total{outcome="applied",route="incidents"} 3`)
	pg.Stop()
	if out := mustRun(t, "", "store", "loss", "-c", cfg); !strings.Contains(out, "the store holds every commit the running member made") {
		t.Fatalf("store loss with the store down, the member running: %q", out)
	}
}

// readsAnswer503 requires each of the member's reads at listen, its
// store paused or stopped, to answer 503 after least and within most.
func readsAnswer503(t *testing.T, listen string, reads []string, least, most time.Duration) {
	t.Helper()
	for _, path := range reads {
		code, body, took := timedGet(t, "http://"+listen+path, 15*time.Second)
		if code != http.StatusServiceUnavailable || took < least || took > most {
			t.Errorf("GET %s with the store away: status %d after %v, want 503 after %v to %v: %s", path, code, took, least, most, body)
		}
	}
}

// readsAnswer200 requires each of the member's reads at listen, its store
// answering again, to answer 200.
func readsAnswer200(t *testing.T, listen string, reads []string) {
	t.Helper()
	for _, path := range reads {
		if code, body, _ := timedGet(t, "http://"+listen+path, 15*time.Second); code != http.StatusOK {
			t.Errorf("GET %s with the store resumed: status %d: %s", path, code, body)
		}
	}
}
