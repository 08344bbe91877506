package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestATwinAppliedAgainAfterItsKeyLeftTheWindowIsToldOnItsFeed: a path
// that trails the other by more than window.ttl delivers twins whose keys
// have left the key window, and an id route applies them again. The
// consumer saw the first copy come from the other feed, so it says so:
// /api/v1/feeds counts the twin on the trailing feed as applied again,
// with how far that feed trails, and so does
// replayguard_feed_applied_again_total{feed}. So it does when run was
// restarted between the two copies: the audit log says which feed
// delivered the first.
func TestATwinAppliedAgainAfterItsKeyLeftTheWindowIsToldOnItsFeed(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "one run", true: "run restarted between the copies"}[restart], func(t *testing.T) {
			twinAppliedAgain(t, restart)
		})
	}
}

func twinAppliedAgain(t *testing.T, restart bool) {
	const ttl = time.Second
	bin := buildBinary(t)
	cfg, listen, a := daemonConfig(t, "")
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	feeds := strings.Replace(string(text), "brokers: ["+a.URL()+"]",
		fmt.Sprintf("feeds: [{name: a, brokers: [%s]}, {name: b, brokers: [%s]}]", a.URL(), b.URL()), 1)
	feeds = strings.Replace(feeds, "window: {ttl: 2h,", fmt.Sprintf("window: {ttl: %s,", ttl), 1)
	if !strings.Contains(feeds, "feeds: [") || !strings.Contains(feeds, "ttl: "+ttl.String()) {
		t.Fatal("the configuration has no broker list or window to replace")
	}
	if err := os.WriteFile(cfg, []byte(feeds), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon, exited := startRun(t, bin, cfg, listen)
	waitUntil(t, "both feeds are up", func() bool {
		code, body := get(t, "http://"+listen+"/readyz")
		return code == http.StatusOK && !strings.Contains(body, "warning")
	})

	sent := time.Now()
	publishMeter(t, a)
	waitUntil(t, "feed a's copy is decided", func() bool { return feedOf(t, listen, "a").Deliveries == 1 })
	if restart {
		stopRun(t, daemon, exited)
		daemon, exited = startRun(t, bin, cfg, listen)
		waitUntil(t, "both feeds are up again", func() bool {
			code, body := get(t, "http://"+listen+"/readyz")
			return code == http.StatusOK && !strings.Contains(body, "warning")
		})
	}
	time.Sleep(ttl + 500*time.Millisecond) // the trailing path's copy comes after its key's ttl
	publishMeter(t, b)
	waitUntil(t, "feed b's copy is decided", func() bool { return feedOf(t, listen, "b").Deliveries == 1 })
	trailed := time.Since(sent) // at most: from a's publish to b's decision

	var state map[string]map[string]float64
	if out := mustRun(t, "", "state", "--json", "-c", cfg, "meter/m1"); json.Unmarshal([]byte(out), &state) != nil || state["meter/m1"]["kwh"] != 2 {
		t.Fatalf("state %s: the id route should have applied the twin again once its key left the window", out)
	}
	fb := feedOf(t, listen, "b")
	if fb.AppliedAgain != 1 {
		t.Fatalf("feed b = %+v: its twin of feed a's message, applied again, is not counted as such", fb)
	}
	if behind := time.Duration(fb.BehindSeconds * float64(time.Second)); behind < ttl+500*time.Millisecond || behind > trailed {
		t.Fatalf("feed b trails by %s, want between %s and %s", behind, ttl+500*time.Millisecond, trailed)
	}
	if fa := feedOf(t, listen, "a"); fa.AppliedAgain != 0 {
		t.Fatalf("feed a = %+v: it delivered first, nothing again", fa)
	}
	if got := metricSum(t, listen, `replayguard_feed_applied_again_total{feed="b"}`); got != 1 {
		t.Fatalf("replayguard_feed_applied_again_total{feed=\"b\"} = %v, want 1", got)
	}
	stopRun(t, daemon, exited)
}

// publishMeter publishes meter m1's first reading to broker, acknowledged.
func publishMeter(t *testing.T, broker *testbroker.Mosquitto) {
	t.Helper()
	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic:   func(src string) string { return "plant/" + src + "/energy" },
		Payload: func(src string, seq int64) []byte { return fmt.Appendf(nil, `{"msgId":"%s-%d","kwh":1}`, src, seq) },
	})
	if got := pub.Publish(context.Background(), "m1", 1); got != 1 {
		t.Fatal("the broker did not acknowledge the meter reading")
	}
}

type feedState struct {
	Name          string  `json:"name"`
	Deliveries    uint64  `json:"deliveries"`
	AppliedAgain  uint64  `json:"applied_again"`
	BehindSeconds float64 `json:"behind_seconds"`
}

// feedOf returns what /api/v1/feeds says of feed name.
func feedOf(t *testing.T, listen, name string) feedState {
	t.Helper()
	_, body := get(t, "http://"+listen+"/api/v1/feeds")
	var got struct{ Feeds []feedState }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("/api/v1/feeds %q: %v", body, err)
	}
	for _, f := range got.Feeds {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("/api/v1/feeds %q has no feed %s", body, name)
	return feedState{}
}
