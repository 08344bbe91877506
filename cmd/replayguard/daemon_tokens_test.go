package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestReviewThroughTheAPINamesTheToken runs the daemon with a viewer's and
// an operator's token: the viewer cannot release, --operator is refused
// (the token names the operator), and the operator's release is audited
// under the token's name.
func TestReviewThroughTheAPINamesTheToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	bin := buildBinary(t)
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	dir := t.TempDir()
	viewerFile, operatorFile := filepath.Join(dir, "viewer"), filepath.Join(dir, "operator")
	os.WriteFile(viewerFile, []byte("v13wer-token\n"), 0o600)
	os.WriteFile(operatorFile, []byte("0perator-token\n"), 0o600)
	cfg := testConfig(t, "")
	b, _ := os.ReadFile(cfg)
	text := strings.Replace(string(b), "tcp://127.0.0.1:1883", broker.URL(), 1)
	text = strings.Replace(text, "http: {listen: 127.0.0.1:9780}", fmt.Sprintf(`http:
  listen: %s
  auth_reads: true
  tokens:
    - {name: watch desk, token_file: %s, role: viewer}
    - {name: j.doe, token_file: %s, role: operator}`, listen, viewerFile, operatorFile), 1)
	os.WriteFile(cfg, []byte(text), 0o644)

	daemon, exited := startRun(t, bin, cfg, listen)
	t.Setenv(EnvToken, "v13wer-token") // reads need a token (auth_reads)

	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src },
		Payload: func(src string, seq int64) []byte {
			if seq == 2 {
				seq = 80
			}
			return fmt.Appendf(nil, `{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"I1","casualty_delta":1}`, src, seq)
		},
	})
	if n := pub.Publish(context.Background(), "e1", 3); n != 3 {
		t.Fatalf("%d of 3 publishes acknowledged", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	var hs []held
	for time.Now().Before(deadline) {
		if hs = listHeld(t, cfg); len(hs) == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(hs) != 1 {
		t.Fatalf("held through the API: %+v", hs)
	}
	id := fmt.Sprint(hs[0].ID)
	if _, errs, code := cli(t, "", "quarantine", "release", id, "--token-name", "watch desk", "-c", cfg); code != 1 ||
		!strings.Contains(errs, "Forbidden: role viewer may not release or discard") {
		t.Fatalf("a viewer's release: exit %d %s", code, errs)
	}
	if _, errs, code := cli(t, "", "quarantine", "release", id, "--operator", "someone", "--token-name", "j.doe", "-c", cfg); code != 2 ||
		!strings.Contains(errs, "--operator is not taken with an API token") {
		t.Fatalf("--operator through the API: exit %d %s", code, errs)
	}
	if _, errs, code := cli(t, "", "quarantine", "release", id, "--token-name", "nobody", "-c", cfg); code != exitUsage ||
		!strings.Contains(errs, `--token-name "nobody" is not in http.tokens ("watch desk", "j.doe")`) {
		t.Fatalf("an unknown --token-name: exit %d %s", code, errs)
	}
	// Every command that reads through the API chooses its token as the
	// writes do.
	t.Setenv(EnvToken, "")
	if _, errs, code := cli(t, "", "state", "-c", cfg); code != 1 || !strings.Contains(errs, "Unauthorized") {
		t.Fatalf("state without a token, reads needing one: exit %d %s", code, errs)
	}
	for _, read := range [][]string{{"state", "--json"}, {"sources", "--json"}, {"audit", "export"},
		{"explain", "incident/I1"}, {"report", "--format", "json"}} {
		args := append(read, "--token-name", "watch desk", "-c", cfg)
		if out, errs, code := cli(t, "", args...); code != 0 || out == "" {
			t.Fatalf("%v: exit %d %s", args, code, errs)
		}
	}
	t.Setenv(EnvToken, "wrong")
	if _, errs, code := cli(t, "", "quarantine", "release", id, "-c", cfg); code != 1 || !strings.Contains(errs, "Unauthorized") {
		t.Fatalf("a wrong $%s: exit %d %s", EnvToken, code, errs)
	}
	t.Setenv(EnvToken, "0perator-token")
	if out := mustRun(t, "", "quarantine", "release", id, "-c", cfg); !strings.Contains(out, "released: applied") {
		t.Fatalf("the operator's release: %q", out)
	}
	if ops := auditOperators(t, cfg); fmt.Sprint(ops) != fmt.Sprintf("map[applied #%s:j.doe]", id) {
		t.Fatalf("operators in the audit through the API: %v", ops)
	}

	stopRun(t, daemon, exited)
	if ops := auditOperators(t, cfg); fmt.Sprint(ops) != fmt.Sprintf("map[applied #%s:j.doe]", id) {
		t.Fatalf("operators in the stored audit: %v", ops)
	}
	mustRun(t, "", "audit", "verify", "-c", cfg)
}
