package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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
