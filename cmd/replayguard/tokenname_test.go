package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/store/embedded"
)

// TestAnUnknownTokenNameIsACommandLineMistake: --token-name naming no
// http.tokens entry is a mistake on the command line, as an unknown flag
// or a missing --reason is: exit 2 with the usage line, never 1, which
// says the command ran and failed.
func TestAnUnknownTokenNameIsACommandLineMistake(t *testing.T) {
	cfg := testConfig(t, "")
	withOperatorToken(t, cfg, "j.doe")
	mustIngest(t, cfg, meterFeed(t, 0, 5))
	held, err := embedded.Open(filepath.Join(filepath.Dir(cfg), "data"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, args := range [][]string{{"state"}, {"quarantine", "release", "1"}, {"outbox", "list"}} {
		_, errs, code := cli(t, "", append(args, "--token-name", "nobody", "-c", cfg)...)
		if code != exitUsage || !strings.Contains(errs, `--token-name "nobody" is not in http.tokens ("j.doe")`) ||
			!strings.Contains(errs, "usage: replayguard "+args[0]) {
			t.Fatalf("%s --token-name nobody: exit %d, want %d with the usage line\n%s", strings.Join(args, " "), code, exitUsage, errs)
		}
	}
}

// An unknown --token-name is the same mistake when no run holds the store
// and the command reads it directly: a command that worked while run was
// down must not start failing with exit 2 once it runs, nor the other way
// round, and a typo must not pass unseen.
func TestAnUnknownTokenNameIsACommandLineMistakeWhetherOrNotRunHoldsTheStore(t *testing.T) {
	cfg := testConfig(t, "")
	mustIngest(t, cfg, meterFeed(t, 0, 5))
	for _, args := range [][]string{{"state"}, {"sources"}, {"quarantine", "list"}, {"audit", "export"}, {"report", "--format", "json"}, {"explain", "meter/meter-0"}} {
		_, errs, code := cli(t, "", append(args, "--token-name", "nobody", "-c", cfg)...)
		if code != exitUsage || !strings.Contains(errs, `--token-name "nobody": the configuration has no http.tokens`) ||
			!strings.Contains(errs, "usage: replayguard "+args[0]) {
			t.Errorf("%s --token-name nobody: exit %d, want %d with the usage line\n%s", strings.Join(args, " "), code, exitUsage, errs)
		}
	}
}

// withOperatorToken gives the configuration file cfg (testConfig's) one
// http.tokens entry, an operator named name, its token in a file beside it.
func withOperatorToken(t *testing.T, cfg, name string) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(filepath.Dir(cfg), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "http: {listen: 127.0.0.1:9780}",
		"http:\n  listen: 127.0.0.1:9780\n  tokens:\n    - {name: "+name+", token_file: "+tokenFile+", role: operator}", 1)
	if text == string(b) {
		t.Fatal("the configuration has no http line to give a token")
	}
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
