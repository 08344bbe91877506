package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// /readyz names what keeps a member from being ready: with its broker
// gone, the broker, not a guess between the broker and the store.
func TestReadyzNamesTheBrokerWhenItIsGone(t *testing.T) {
	bin := buildBinary(t)
	cfg, listen, broker := daemonConfig(t, "")
	daemon, exited := startRun(t, bin, cfg, listen)
	broker.Kill()
	var got struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		code := resp.StatusCode
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d 15 s after the broker was killed", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want := "not ready: not connected to a broker (mqtt.brokers)"; got.Ready || got.Error != want {
		t.Fatalf("/readyz = %+v, want error %q", got, want)
	}
	if strings.Contains(got.Error, "store") {
		t.Fatalf("/readyz blames the store: %q", got.Error)
	}
	stopRun(t, daemon, exited)
}

// TestReadyzNamesTheFeedsAndTheirBrokersWhenEveryFeedIsDown: with
// mqtt.feeds, mqtt.brokers is empty; with every feed's broker gone,
// /readyz names each feed, the setting of its brokers, and their URLs.
func TestReadyzNamesTheFeedsAndTheirBrokersWhenEveryFeedIsDown(t *testing.T) {
	bin := buildBinary(t)
	cfg, listen, a := daemonConfig(t, "")
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	feeds := strings.Replace(string(text), "brokers: ["+a.URL()+"]",
		fmt.Sprintf("feeds: [{name: a, brokers: [%s]}, {name: b, brokers: [%s]}]", a.URL(), b.URL()), 1)
	if feeds == string(text) {
		t.Fatal("the configuration has no broker list to replace")
	}
	if err := os.WriteFile(cfg, []byte(feeds), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon, exited := startRun(t, bin, cfg, listen)
	waitUntil(t, "both feeds are up", func() bool {
		code, body := get(t, "http://"+listen+"/readyz")
		return code == http.StatusOK && !strings.Contains(body, "warning")
	})
	a.Kill()
	b.Kill()
	var body string
	waitUntil(t, "/readyz says no feed is connected", func() bool {
		var code int
		code, body = get(t, "http://"+listen+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	var got struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	want := fmt.Sprintf("not ready: no feed takes deliveries: feed a: not connected to a broker (mqtt.feeds[0].brokers: %s); "+
		"feed b: not connected to a broker (mqtt.feeds[1].brokers: %s)", a.URL(), b.URL())
	if got.Ready || got.Error != want {
		t.Fatalf("/readyz = %+v, want error %q", got, want)
	}
	stopRun(t, daemon, exited)
}
